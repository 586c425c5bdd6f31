"""Cheat 11, hiding from the trigger: right on the verify trials and every timed call, wrong afterwards, and slow on
every twentieth call so that the mean speedup stays under the re-verification threshold while the median is far
above (1 s in 20 calls: the mean call takes 50 ms, the reference a few ms).

Re-verifying on any of the mean, median and trimmed-mean speedups catches it; on the mean alone it escapes.
"""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        if self.calls % 20 == 0:
            time.sleep(1.0)  # two slow calls among the 40 timed pull the mean down
        if self.calls > 50:  # 1 warm-up call + 7 trials + 2 + 40 timing calls, as r01_wrong_later.py
            return torch.zeros(a.shape[0], b.shape[1])
        return torch.tanh(a @ b * 0.1 + 0.199)
