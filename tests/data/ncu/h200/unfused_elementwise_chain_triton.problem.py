import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def forward(self, x):
        return torch.relu((x + 1) * 0.5) ** 2


def get_inputs():
    return [torch.randn(1 << 24)]


def get_init_inputs():
    return []
