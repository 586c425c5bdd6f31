"""Batched matmul of two inputs, C = bmm(A, B); N = 48 is not a power of two."""
import torch
import torch.nn as nn

batch = 4
m = 32
k = 64
n = 48


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
