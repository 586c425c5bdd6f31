"""Attack: move the runner to a CPU of the candidate's choosing before anything is timed. On the H100 host a loop of
launches ran 1.4x faster on two of its sixteen CPUs than on the rest (docs/h200/timing, session 24): a host-bound
candidate that moved there would take a speedup it did not earn. A review worker's seccomp filter refuses the move
(review/confine_os.py), and this file does not hide the refusal: refused, its import fails."""
import os

import torch
import torch.nn as nn

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * 2.0 + 1.0
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
