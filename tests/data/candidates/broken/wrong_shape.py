"""Broken candidate for problems/p07_mean_dim.py: right values, wrong shape.

The reference returns (16, 32); this returns (1, 16, 32) (the output is allocated with a leftover leading batch
dimension). torch.allclose(out, ref) broadcasts the two and says True, so a reviewer must compare shapes
explicitly before comparing values.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mean_lastdim_kernel(x_ptr, out_ptr, n_rows, R, BLOCK_ROWS: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_mask = rows < n_rows
    acc = tl.zeros((BLOCK_ROWS,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        cols = r0 + tl.arange(0, BLOCK_R)
        mask = row_mask[:, None] & (cols[None, :] < R)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * R + cols[None, :], mask=mask, other=0.0), axis=1)
    tl.store(out_ptr + rows, acc / R, mask=row_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim  # this candidate only handles the last dimension

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        *lead, R = x.shape
        n_rows = x.numel() // R
        out = torch.empty((1, *lead), device=x.device, dtype=x.dtype)  # bug: extra leading dimension
        BLOCK_ROWS = 16
        _mean_lastdim_kernel[(triton.cdiv(n_rows, BLOCK_ROWS),)](x, out, n_rows, R, BLOCK_ROWS=BLOCK_ROWS, BLOCK_R=64)
        return out
