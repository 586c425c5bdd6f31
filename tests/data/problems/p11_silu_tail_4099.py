"""SiLU on a 1-D tensor of 4099 elements: not a multiple of any power-of-two block size, so the tail matters."""
import torch
import torch.nn as nn

n_elements = 4099


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(n_elements) * 3.0]


def get_init_inputs():
    return []
