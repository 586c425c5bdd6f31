import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def unary_kernel(x_ptr, y_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if OP == 0:
        y = x + 1.0
    elif OP == 1:
        y = x * 0.5
    elif OP == 2:
        y = tl.maximum(x, 0.0)
    else:
        y = x * x
    tl.store(y_ptr + offs, y, mask=mask)


def unary(x, op):
    y = torch.empty_like(x)
    n = x.numel()
    unary_kernel[(triton.cdiv(n, 1024),)](x, y, n, OP=op, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        x = inputs[0]
        for op in range(4):
            x = unary(x, op)
        return x
