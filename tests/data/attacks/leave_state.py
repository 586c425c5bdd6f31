"""Attack (on the next review, not this one): a right answer, and a process left changed for whoever comes next:
a marker on torch, a thread count, an environment variable.

Caught by a fresh runner per candidate: the next review never sees any of it (tests/data/attacks/check_state.py).
"""
import os

import torch
import torch.nn as nn

torch.kernelskill_left_behind = True
os.environ["KERNELSKILL_LEFT_BEHIND"] = "1"
torch.set_num_threads(1)


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * 2.0 + 1.0
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
