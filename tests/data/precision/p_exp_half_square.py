"""y = exp(x * x / 2): finite on standard-normal inputs and offset by 5, overflows (inf) on inputs scaled by 10."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x * x * 0.5)


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
