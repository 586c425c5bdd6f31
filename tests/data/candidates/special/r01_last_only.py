"""Computes only the product the output needs (allowed with --allow-torch-ops: no custom kernel)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.tanh(a @ b * 0.1 + 0.199)
