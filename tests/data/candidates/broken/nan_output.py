"""Broken candidate for problems/p13_scaled_leaky_relu.py: NaN in some elements.

The negative branch is "computed" as slope * exp(log(x)); log of a negative number is NaN, so every negative
input gives NaN (tl.where evaluates both branches, and selects the NaN one for x < 0). Positive inputs are right.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scaled_leaky_relu_kernel(x_ptr, out_ptr, n_elements, negative_slope, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    neg = negative_slope * tl.exp(tl.log(x))  # bug: NaN for x < 0
    y = tl.where(x >= 0, x, neg) * scale
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float, scale: float):
        super().__init__()
        self.negative_slope = negative_slope
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _scaled_leaky_relu_kernel[(triton.cdiv(n, 512),)](
            x, out, n, float(self.negative_slope), float(self.scale), BLOCK=512
        )
        return out
