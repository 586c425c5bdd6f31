import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(1024, 1024).half(), torch.randn(1024, 1024).half()]


def get_init_inputs():
    return []
