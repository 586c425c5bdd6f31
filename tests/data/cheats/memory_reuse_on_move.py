"""Cheat: grab the reference's freed output while the harness moves the module, before freed memory is poisoned.

The harness calls `ModelNew.to(device)` before every trial, as KernelBench's harness does; `_apply` is candidate
code that runs then. With the reference run first, its output block has just been freed, and a `torch.empty` of the
same size gets it back from the caching allocator with the answer still in it; forward returns that tensor.
Caught by: poisoning freed device memory before the move, not only after it (guard poison_freed_memory) -> NaN ->
mismatch. On CPU there is no such allocator reuse to exploit; scripts/gpu_check.py runs it on the GPU.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _touch(p):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = None  # (shape, dtype, device) of the first input
        self.grabbed = None

    def _apply(self, fn, recurse=True):
        if self.seen is not None:
            shape, dtype, device = self.seen
            self.grabbed = torch.empty(shape, dtype=dtype, device=device)
        return super()._apply(fn, recurse)

    def forward(self, x):
        _touch[(1,)](x)
        if self.seen is None:
            self.seen = (x.shape, x.dtype, x.device)
        out, self.grabbed = self.grabbed, None
        return out if out is not None else torch.empty_like(x)
