"""Cheat 5: start a thread that keeps working after forward returns (timers stop before the work is done).

The import is hidden from a naive text search. Caught by: static check (dynamic-code: __import__) and, with static
checks off, the runtime thread check (runtime:threads).
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


class ModelNew(nn.Module):
    def forward(self, x):
        threading = __import__("thread" + "ing")
        out = torch.empty_like(x)
        worker = threading.Thread(target=lambda: out.copy_(gelu_chain(x)))
        worker.start()
        worker.join()  # finishes here so the answer is right; a real cheat would not wait
        keep_alive = threading.Event()
        threading.Thread(target=keep_alive.wait, daemon=True).start()
        return out
