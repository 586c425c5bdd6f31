"""Broken candidate for problems/p11_silu_tail_4099.py: the grid is n // BLOCK instead of cdiv(n, BLOCK), so the
last partial block (elements 4096..4098) is never computed. Correct whenever numel is a multiple of 1024.

The output is zero-initialised (not torch.empty) so the failure does not depend on what an allocator happens to
hand back: the missing tail is deterministically 0 instead of silu(x).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _silu_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # no mask: only safe because every launched block is full
    tl.store(out_ptr + offs, x * tl.sigmoid(x))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.zeros_like(x)
        n = x.numel()
        BLOCK = 1024
        grid = (n // BLOCK,)  # bug: should be triton.cdiv(n, BLOCK)
        _silu_kernel[grid](x, out, BLOCK=BLOCK)
        return out
