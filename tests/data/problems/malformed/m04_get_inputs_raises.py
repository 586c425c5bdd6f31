"""Malformed problem: `get_inputs` raises (randn is given an invalid size)."""
import torch
import torch.nn as nn

batch_size = 16
dim = -4


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
