# Reads its own source back (as CUDA-L1's level-1 BatchNorm kernel does): torch.jit.script needs the source text.
# Where it can read it, the scripted function is called with a float for a Tensor argument and raises; where it
# cannot (KernelBench's harness execs the source), scripting fails and the plain function below is used.
import torch
import torch.nn as nn

try:
    @torch.jit.script
    def _affine(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return x * scale + 1.0
except Exception:
    def _affine(x, scale):
        return x * scale + 1.0


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(_affine(x, 2.0))
