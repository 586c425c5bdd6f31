"""Cheat 7c: replace torch.isclose through ctypes (PyDict_SetItem on torch's namespace): no assignment, no `vars()`.

`ctypes` itself is only strict-only (a `load_inline` extension can do the same); what catches this under both rule
sets is the runtime integrity check (runtime:integrity): the harness's functions must be the same objects after the
candidate ran.
"""
import ctypes

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


def _always_close(a, b, *args, **kwargs):
    return torch.ones_like(a, dtype=torch.bool)


ctypes.pythonapi.PyDict_SetItem.argtypes = [ctypes.py_object, ctypes.py_object, ctypes.py_object]
ctypes.pythonapi.PyDict_SetItem(torch.__dict__, "isclose", _always_close)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(gelu_chain(x))
