"""Attack: right answers while the runner's own stages run, wrong ones (zeros) after: the calls a runner makes
once it has finished checking are never checked by it.

Caught by the judge (Guards.judge): its trials and the random picks from its batch come after the runner's stages.
"""
import torch
import torch.nn as nn

HONEST_CALLS = 20  # more than the runner's own stages (about 15) and the judge's 3 trials make on a CPU review


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > HONEST_CALLS:
            return torch.zeros_like(x)
        y = x * 2.0 + 1.0
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
