"""Attack: a forward that never returns, announcing a new stage every half second on the runner's result pipe so
that a harness restarting its stage clock on each announcement never times it out.

Caught by the judge's own deadlines: stages only move forward and the review is held to the sum of its stage limits.
"""
import json
import os
import sys
import time

import torch
import torch.nn as nn

_fd = int(sys.argv[1])


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            for stage in ("load", "compile", "verify", "time"):
                os.write(_fd, (json.dumps({"type": "stage", "stage": stage}) + "\n").encode())
                time.sleep(0.5)
