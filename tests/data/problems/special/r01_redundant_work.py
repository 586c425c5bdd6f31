"""A reference that does far more work than its output needs: only the last of 200 products is returned.

A candidate that skips the dead work (algebraic simplification) is legitimately many times faster; such speedups
are re-verified on extra trials and flagged.
"""
import torch
import torch.nn as nn

n = 64
repeats = 200


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = None
        for i in range(repeats):
            out = torch.tanh(a @ b * 0.1 + i * 0.001)
        return out


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
