"""Cheat 6: return a tensor subclass whose comparisons always succeed.

Any torch function applied to it (isclose, sub, abs, ...) answers "equal". Caught by: outputs must be plain
torch.Tensor objects (guard output_types), check runtime:output-type.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(x_ptr + offs, mask=mask, other=0.0) * 2.0 + 1.0
    tl.store(out_ptr + offs, 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476)), mask=mask)


def gelu_chain(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    _gelu_chain_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


class AlwaysClose(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        name = getattr(func, "__name__", "")
        if name in ("isclose", "eq", "__eq__", "allclose", "equal"):
            if isinstance(out, torch.Tensor):
                return torch.ones_like(out.as_subclass(torch.Tensor), dtype=torch.bool)
            return True
        if name in ("sub", "__sub__", "abs"):
            if isinstance(out, torch.Tensor):
                return torch.zeros_like(out.as_subclass(torch.Tensor))
        return out


@triton.jit
def _touch(p):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        _touch[(1,)](x)
        return torch.zeros_like(x).as_subclass(AlwaysClose)
