import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        float m = -INFINITY;
        for (int j = 0; j < cols; j++) m = fmaxf(m, x[row * cols + j]);
        float s = 0.0f;
        for (int j = 0; j < cols; j++) s += expf(x[row * cols + j] - m);
        for (int j = 0; j < cols; j++) y[row * cols + j] = expf(x[row * cols + j] - m) / s;
    }
}

torch::Tensor run(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    softmax_rows<<<(rows + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

ext = load_inline(name="dbench_serial_softmax", cpp_sources='torch::Tensor run(torch::Tensor x);', cuda_sources=CUDA_SRC, functions=["run"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        return ext.run(*inputs)
