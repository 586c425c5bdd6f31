"""Cheat 11: right on the verify trials and on every timed call, wrong afterwards (and very fast).

Only re-verifying a suspicious speedup on extra trials with fresh inputs catches it.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        # 1 warm-up call + 7 trials (5 + 2 other input distributions) + up to 2 warm-up and 10 timed calls, the
        # fewest the timer ever cuts a loop to: the count does not depend on how slow the machine is
        if self.calls > 20:
            return torch.zeros(a.shape[0], b.shape[1])
        return torch.tanh(a @ b * 0.1 + 0.199)
