import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _l2_normalize_kernel(x_ptr, out_ptr, n_cols, row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    norm = tl.sqrt(tl.sum(x * x, axis=0))
    tl.store(out_ptr + row * row_stride + cols, x / tl.maximum(norm, eps), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        _l2_normalize_kernel[(n_rows,)](x, out, n_cols, x.stride(0), 1e-12, BLOCK=triton.next_power_of_2(n_cols))
        return out
