"""GPU-sized row softmax on 16384 x 8192 fp32 (512 MiB per tensor).

Eager softmax is a single memory-bound kernel (~1 GiB of traffic); estimated ~0.3 ms on an H200. Raise `rows`
if a longer reference is wanted (host memory for get_inputs grows with it).
"""
import torch
import torch.nn as nn

rows = 16384
cols = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
