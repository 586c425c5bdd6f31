import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def layernorm_serial_kernel(x_ptr, y_ptr, n, eps):
    # one program per row, one element per step: a scalar loop
    row = tl.program_id(0)
    s = 0.0
    for j in range(0, n):
        s += tl.load(x_ptr + row * n + j)
    mean = s / n
    v = 0.0
    for j in range(0, n):
        d = tl.load(x_ptr + row * n + j) - mean
        v += d * d
    rstd = 1.0 / tl.sqrt(v / n + eps)
    for j in range(0, n):
        tl.store(y_ptr + row * n + j, (tl.load(x_ptr + row * n + j) - mean) * rstd)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        x = inputs[0]
        y = torch.empty_like(x)
        layernorm_serial_kernel[(x.shape[0],)](x, y, x.shape[1], 1e-5)
        return y
