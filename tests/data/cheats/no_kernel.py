"""Cheat 9: no kernel at all; PyTorch does the work. Caught by: policy:no-custom-kernel."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x * 2.0 + 1.0)
