import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def forward(self, x):
        for _ in range(16):
            x = torch.relu(torch.sin(x) * 1.01 + 0.5)
        return x


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
