"""Two outputs of different shapes: (tanh(x), row max of x)."""
import torch
import torch.nn as nn

batch_size = 24
dim = 200


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        return torch.tanh(x), torch.amax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim) * 2.0]


def get_init_inputs():
    return []
