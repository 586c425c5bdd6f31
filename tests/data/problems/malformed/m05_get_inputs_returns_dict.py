"""Malformed problem: `get_inputs` returns a dict instead of a list of inputs."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return {"x": torch.randn(16, 16)}


def get_init_inputs():
    return []
