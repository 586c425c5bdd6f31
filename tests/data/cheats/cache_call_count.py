"""Cheat 3: compute honestly for the first calls (those a naive harness verifies), then return a cached result.

Timing then measures a dictionary lookup. Caught by: checking the outputs of the last timed calls on rotating input
contents (guard timed_outputs), check runtime:timed-outputs.
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
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        if self.last is None or self.calls <= 8:  # the warm-up call and the 7 verify trials (5 + 2 distributions)
            self.last = gelu_chain(x)
        return self.last
