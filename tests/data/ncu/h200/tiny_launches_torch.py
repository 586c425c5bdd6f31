import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for _ in range(16):
            x = torch.sin(x)
            x = x * 1.01
            x = x + 0.5
            x = torch.relu(x)
        return x
