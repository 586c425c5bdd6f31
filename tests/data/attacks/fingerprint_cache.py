"""Attack: outputs memoized by a few input values. The runner's own timing rotates through a handful of input sets,
so after the first round every timed call is a dictionary lookup; the first call on new inputs is slow on purpose
(a stand-in for the real, slower computation). Every output it returns is right.

Caught by the judge's batch (Guards.judge): every call gets inputs of its own, so the cache never hits, and the
judge's clock sees the real time per call; the speedup is then held to it (flag timing_unconfirmed).
"""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        key = (float(x.reshape(-1)[0]), float(x.reshape(-1)[-1]), tuple(x.shape))
        if key not in self.seen:
            time.sleep(0.02)
            y = x * 2.0 + 1.0
            self.seen[key] = 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
        return self.seen[key]
