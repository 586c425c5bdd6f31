"""Broken candidate for problems/p01_pointwise_gelu_chain.py: never finishes.

The kernel spin-waits on a "ready" flag that nothing ever sets (a volatile load, so the compiler cannot hoist it
out of the loop). On a GPU the kernel runs until the worker is killed; under TRITON_INTERPRET=1 the interpreter
loops forever in Python. A reviewer must stop it with its per-stage time limit.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_chain_wait_kernel(x_ptr, out_ptr, flag_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    while tl.load(flag_ptr, volatile=True) == 0:  # flag stays 0 forever
        pass
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = x * 2.0 + 1.0
    tl.store(out_ptr + offs, 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        n = x.numel()
        _gelu_chain_wait_kernel[(triton.cdiv(n, 1024),)](x, out, flag, n, BLOCK=1024)
        return out
