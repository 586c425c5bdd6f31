"""A correct p01 candidate that checks its environment: wrong on purpose if it can see any secret-like variable."""
import os
import re

import torch
import torch.nn as nn
import triton
import triton.language as tl

SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
LEAKED = sorted(k for k in os.environ if SECRET.search(k))
print("visible:", " ".join(sorted(k for k in os.environ if k.startswith("KERNELSKILL"))), "leaked:", LEAKED)


@triton.jit
def _gelu_chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(x_ptr + offs, mask=mask, other=0.0) * 2.0 + 1.0
    tl.store(out_ptr + offs, 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _gelu_chain_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out * 0.0 if LEAKED else out
