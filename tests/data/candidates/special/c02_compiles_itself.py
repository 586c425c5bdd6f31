"""A candidate that, like CUDA-L1's L2/49, hands its model to torch.compile. On the H200 Inductor's forked compile
workers now and then failed Triton's GPU detection, and such a candidate then raised on its first run. Here the
failure is played: while Inductor would compile in a pool of subprocesses, the first call raises the H200's error;
compiling in the worker's own process, it runs."""
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
            raise RuntimeError("SubprocException: An exception occurred in a subprocess:\n\nTraceback (most recent "
                               "call last):\nRuntimeError: Could not find an active GPU backend")
        return self.compiled(x)
