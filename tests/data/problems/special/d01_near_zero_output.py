"""A degenerate problem: the output is (numerically) zero for every input, so a trivial kernel passes.

(Published benchmarks contain tasks like this; the reviewer must flag them rather than report a speedup silently.)
"""
import torch
import torch.nn as nn

batch_size = 16
dim = 256


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x) * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
