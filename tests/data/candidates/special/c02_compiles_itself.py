"""A candidate that, like CUDA-L1's L2/49, hands its model to torch.compile. On the H200 Inductor's forked compile
workers now and then failed Triton's GPU detection, and such a candidate then raised on its first run; a review worker
compiles in its own process. The forward says which way Inductor compiles: a pool of workers would fail here."""
import torch
import torch._inductor.config
import torch.nn as nn


class _Body(nn.Module):
    def __init__(self, negative_slope: float, scale: float):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale

    def forward(self, x):
        return self.scale * torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float, scale: float):
        super().__init__()
        self.compiled = torch.compile(_Body(negative_slope, scale))

    def forward(self, x):
        if torch._inductor.config.compile_threads != 1:
            raise RuntimeError(f"Inductor would compile in {torch._inductor.config.compile_threads} subprocesses")
        return self.compiled(x)
