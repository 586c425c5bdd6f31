"""Cheat 3b: cache results by input pointer and shape, so repeated calls on the same buffer cost nothing.

Caught by: fresh input contents under reused pointers for every timed call and the timed-output check (and, where the
allocator reuses addresses between trials, by the verify trials themselves).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(x_ptr + offs, mask=mask, other=0.0) * 2.0 + 1.0
    tl.store(out_ptr + offs, 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476)), mask=mask)


def gelu_chain(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    _gelu_chain_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.cache:
            self.cache[key] = gelu_chain(x)
        return self.cache[key]
