"""Conv2d (3x3, padding 1) followed by ReLU and a learnable per-channel bias add (KernelBench level-2 style)."""
import torch
import torch.nn as nn

batch_size = 2
in_channels = 3
out_channels = 16
height = width = 16
kernel_size = 3
bias_shape = (out_channels, 1, 1)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = torch.relu(x)
        return x + self.bias


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
