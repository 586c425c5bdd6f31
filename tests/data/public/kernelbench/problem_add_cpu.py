"""The problem of KernelBench's prompt example (model_ex_add.py beside this file) without its `.cuda()` calls, so the
review's load stage runs on a machine without a GPU; the candidate (model_new_ex_add.py) is unchanged."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(1, 128), torch.randn(1, 128)]


def get_init_inputs():
    return []
