"""Attack (on the reference, through the caches): a right answer, and a file planted in every build and JIT cache
this runner may write. A compiled module planted where Triton keeps its launchers (or Inductor its graphs, or the
builder its extensions) is loaded by the next process that looks it up there; were that the reference's runner, the
candidate's code would run where the judge's trusted outputs and times come from.

It also plants for the next candidate: a file in the same caches (a different source's runner would load a module
planted under its key), and a precompiled header where every later build includes it.

Caught by caches no other runner reads (review/caches.py): the reference runner's are a set of their own, a
candidate's are its source's alone, and the precompiled headers are the harness's, which a runner may only read; this
file's plant lands only in its own caches.
"""
import os

import torch
import torch.nn as nn

for name in ("KERNELSKILL_CACHE", "TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH",
             "TORCHINDUCTOR_CACHE_DIR", "KERNELSKILL_HEADERS"):
    try:
        with open(os.path.join(os.environ[name], "planted-by-a-candidate"), "w") as f:
            f.write("code for whoever loads this next\n")
    except (KeyError, OSError):
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * 2.0 + 1.0
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
