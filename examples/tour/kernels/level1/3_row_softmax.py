"""A kernel for level1/3_row_softmax.py, wrong on purpose so that the tour shows how a failure reads: each program
reads one block of 128 columns, but rows are 256 long, so the maximum and the sum miss half of every row."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.zeros_like(x)
        rows, cols = x.shape
        _row_softmax_kernel[(rows,)](x, out, cols, BLOCK=128)  # the bug: BLOCK must cover a row (256 here)
        return out
