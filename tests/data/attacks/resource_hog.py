"""Attack on the harness's resources, not the verdict: 40 MB printed to the log (on the H200 a 150 MB log took 4 GB
of the harness's memory), then as many open files as the process may hold. A right answer after that.

Caught by the log drained as it arrives (review/sandbox.py LogSink: the first 16 MiB kept, then only the last 1 MiB)
and by the zygote's resource limits (review/zygote.py: 4096 open files).
"""
import os
import sys

import torch
import torch.nn as nn

LINE = "x" * 1023 + "\n"
for _ in range(40 * 1024):
    sys.stdout.write(LINE)
sys.stdout.flush()
opened = []
try:
    for _ in range(30000):
        opened.append(os.open("/dev/null", os.O_RDONLY))
except OSError as exc:
    print(f"resource-hog: stopped at {len(opened)} open files: {exc}", flush=True)
else:
    print(f"resource-hog: opened {len(opened)} files", flush=True)
for fd in opened:
    os.close(fd)
print("resource-hog: the end of the flood", flush=True)


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * 2.0 + 1.0
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
