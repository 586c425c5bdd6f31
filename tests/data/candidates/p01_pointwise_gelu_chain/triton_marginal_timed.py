"""Honest, but one element of every output after the verify trials lands just outside the tolerance, as a reduction
whose order varies from call to call can (CUDA-L1's L1/23 softmax: 1 of 262144 elements on one timed call on the
H200). Not a stale result: the timed-output check flags it (timed_outputs_marginal) and keeps the verdict."""
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        x = x.contiguous()
        out = torch.empty_like(x)
        _gelu_chain_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        if self.calls > 8:  # the warm-up call and the 7 verify trials (5 + 2 other input distributions) are exact
            out.view(-1)[0] += 0.5
        return out
