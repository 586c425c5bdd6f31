import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, y_ptr, n_cols, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % n_cols, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x + b, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.fc = nn.Linear(2048, 2048)  # the reference's parameters, by name

    def forward(self, *inputs):
        x = inputs[0]
        h = torch.mm(x, self.fc.weight.t())
        y = torch.empty_like(h)
        n = h.numel()
        bias_relu_kernel[(triton.cdiv(n, 1024),)](h, self.fc.bias, y, h.shape[1], n, BLOCK=1024)
        return y
