"""Malformed problem: defines `Net` instead of `Model`."""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
