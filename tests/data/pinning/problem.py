"""p01's pointwise chain, y = gelu(x * 2 + 1), whose reference says on each call which CPUs its thread may run on
(one line to stdout, which the reference runner's log keeps): how a test sees where the judge ran its timed calls
(review/pinning.py)."""
import os

import torch
import torch.nn as nn

batch_size = 16
dim = 256


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("cpus", ",".join(map(str, sorted(os.sched_getaffinity(0)))), flush=True)
        return torch.nn.functional.gelu(x * 2.0 + 1.0)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
