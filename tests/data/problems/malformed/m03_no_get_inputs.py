"""Malformed problem: `get_inputs` is missing (misspelled as `get_input`)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_input():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
