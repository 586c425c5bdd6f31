"""Elementwise op with scalar constructor arguments: scale * leaky_relu(x, negative_slope)."""
import torch
import torch.nn as nn

batch_size = 16
dim = 300
negative_slope = 0.07
scale = 1.5


class Model(nn.Module):
    def __init__(self, negative_slope: float, scale: float):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [negative_slope, scale]
