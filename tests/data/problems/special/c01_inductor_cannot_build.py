"""Pointwise chain: y = gelu(x * 2 + 1), as p01, on a machine where Inductor cannot build: its C++ compiler is a
path that does not exist, so torch.compile(Model) raises on its first call while eager PyTorch runs. (A compile
baseline that fails must cost the baseline, never the candidate's review.)"""
import torch
import torch.nn as nn
import torch._inductor.config

torch._inductor.config.cpp.cxx = ("/nonexistent/kernelskill-test-c++",)

batch_size = 16
dim = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 2.0 + 1.0
        return torch.nn.functional.gelu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
