"""Not an attack: a right answer that fails loudly when a process an earlier candidate changed serves it
(tests/data/attacks/leave_state.py)."""
import os

import torch
import torch.nn as nn

if getattr(torch, "kernelskill_left_behind", False) or os.environ.get("KERNELSKILL_LEFT_BEHIND"):
    raise RuntimeError("this runner served an earlier candidate: its state is still here")


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * 2.0 + 1.0
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
