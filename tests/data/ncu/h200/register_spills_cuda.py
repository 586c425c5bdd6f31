import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void histogram_smooth(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float buf[64];
    for (int j = 0; j < 64; ++j) buf[j] = x[(i + j * 4099) % n];
    float s = 0.0f;
    for (int j = 0; j < 64; ++j) s += buf[(j * 7 + i) & 63] * (float)(j + 1);
    y[i] = s;
}

torch::Tensor run(torch::Tensor x) {
    int n = x.numel();
    auto y = torch::empty_like(x);
    histogram_smooth<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="dbench_spill", cpp_sources='torch::Tensor run(torch::Tensor x);', cuda_sources=CUDA_SRC, functions=["run"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        return ext.run(*inputs)
