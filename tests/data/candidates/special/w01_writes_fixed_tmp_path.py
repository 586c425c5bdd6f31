"""Writes a file to a fixed path under /tmp when imported and reads it back, as published kernels do with their
sources and build folders (CUDA-L1's L3/43 writes `/tmp/cuda_extensions/*.cu` and builds them with
`torch.utils.cpp_extension.load`); KernelBench's harness lets them. The gelu chain's scale comes from that file."""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl

FOLDER = "/tmp/kernelskill_w01_extension"
os.makedirs(FOLDER, exist_ok=True)
with open(os.path.join(FOLDER, "scale.txt"), "w") as f:
    f.write("2.0")
with open(os.path.join(FOLDER, "scale.txt")) as f:
    SCALE = float(f.read())


@triton.jit
def _gelu_chain_kernel(x_ptr, out_ptr, n_elements, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) * scale + 1.0
    tl.store(out_ptr + offs, 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        _gelu_chain_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), SCALE, BLOCK=1024)
        return out
