import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void cumsum_rows(const float* x, float* y, int rows, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) {
        acc += x[row * n + j];
        y[row * n + j] = acc;
    }
}

torch::Tensor run(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    cumsum_rows<<<(rows + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

ext = load_inline(name="dbench_serial_scan", cpp_sources='torch::Tensor run(torch::Tensor x);', cuda_sources=CUDA_SRC, functions=["run"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        return ext.run(*inputs)
