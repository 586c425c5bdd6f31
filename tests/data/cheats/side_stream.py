"""Cheat 5c (CUDA only; for problems/gpu/g01_pointwise_chain_64m.py): do the work on a side stream and return without waiting for it.

A timer that records its stop event on the current stream stops before the work is done. The answer is still right
once the device is synchronized. Guard device_sync: the whole device is synchronized before the stop event, so the
side-stream work is timed; without it the candidate looks much faster than it is.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    # the chain of problems/gpu/g01: out = tanh(gelu(2x + 1)) * x
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = x * 2.0 + 1.0
    g = 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))
    tl.store(out_ptr + offs, (2.0 * tl.sigmoid(2.0 * g) - 1.0) * x, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        out = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(20):  # plenty of hidden work
                _chain_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
