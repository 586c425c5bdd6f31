import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def column_gather_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    # y = x[:, ::8] made contiguous; program (r, b): lanes walk one output row, reading every 8th float.
    r = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_cols // 8
    v = tl.load(x_ptr + r * n_cols + offs * 8, mask=mask)
    tl.store(y_ptr + r * (n_cols // 8) + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        x = inputs[0]
        y = torch.empty((x.shape[0], x.shape[1] // 8), device=x.device)
        column_gather_kernel[(x.shape[0], triton.cdiv(x.shape[1] // 8, 256))](x, y, x.shape[0], x.shape[1], BLOCK=256)
        return y
