import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tanh_rowmax_kernel(x_ptr, tanh_ptr, max_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    # tanh(x) = 2 * sigmoid(2x) - 1 (tl has no tanh that also runs in the interpreter)
    t = 2.0 * tl.sigmoid(2.0 * x) - 1.0
    tl.store(tanh_ptr + row * row_stride + cols, t, mask=mask)
    tl.store(max_ptr + row, tl.max(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        t = torch.empty_like(x)
        m = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        _tanh_rowmax_kernel[(n_rows,)](x, t, m, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))
        return t, m
