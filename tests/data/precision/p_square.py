"""fp32 pointwise: y = 0.5 * x * x + x."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x * 0.5 + x


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
