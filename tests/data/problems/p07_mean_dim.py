"""Mean over the last dimension, dimension dropped (output shape (16, 32))."""
import torch
import torch.nn as nn

batch_size = 16
dim1 = 32
dim2 = 60
reduce_dim = 2


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.rand(batch_size, dim1, dim2) + 0.5]


def get_init_inputs():
    return [reduce_dim]
