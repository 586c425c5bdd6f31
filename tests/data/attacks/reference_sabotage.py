"""Attack: slow the reference down in the runner, so the candidate looks fast beside it. At import the candidate
wraps the function the reference calls (GELU) with a 5 ms sleep; its own forward does not call it.

Caught by the judge (Guards.judge): the reference is timed in a runner of its own, where no candidate code ran, and
the candidate runner's reference may be at most REF_SLACK slower than that (flag reference_slowed).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

_original = F.gelu


def _slow(*args, **kwargs):
    time.sleep(0.005)
    return _original(*args, **kwargs)


F.gelu = _slow


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * 2.0 + 1.0
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
