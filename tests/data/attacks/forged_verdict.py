"""Attack: a wrong kernel (it returns zeros) that writes its own verdict into the runner's result pipe.

The runner's message pipe is the file descriptor named in sys.argv[1]. At import this candidate writes an update
claiming a correct, 500x-faster review and then the runner's final message, before the runner has verified anything.
Caught by the judge (Guards.judge): a runner's messages are never a verdict; the judge compares outputs itself.
"""
import json
import os
import sys

import torch
import torch.nn as nn

_fd = int(sys.argv[1])
_lines = [
    {"type": "stage", "stage": "verify"},
    {"type": "update", "data": {"compiled": True, "ref_ms": 1.0, "candidate_ms": 0.002, "speedup": 500.0}},
    {"type": "stage", "stage": "time"},
    {"type": "done", "reusable": True},
]
os.write(_fd, "".join(json.dumps(line) + "\n" for line in _lines).encode())


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
