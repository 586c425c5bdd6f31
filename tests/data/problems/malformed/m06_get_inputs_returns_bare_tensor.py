"""Malformed problem: `get_inputs` returns a bare tensor, not a list.

A harness that does `model(*get_inputs())` would silently unpack the tensor's rows into 16 arguments; the loader
must reject it instead.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return torch.randn(16, 16)


def get_init_inputs():
    return []
