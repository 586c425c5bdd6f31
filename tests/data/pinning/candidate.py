"""Correct for problem.py here (p01's chain), and says on each call which CPUs its thread may run on (one line to
stdout, which the review's worker log keeps): how a test sees where the judge ran its timed calls (review/pinning.py)."""
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        print("cpus", ",".join(map(str, sorted(os.sched_getaffinity(0)))), flush=True)
        y = x * 2.0 + 1.0
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
