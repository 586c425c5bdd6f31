import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void gemv_rows(const float* A, const float* x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc += A[row * K + k] * x[k];
        y[row] = acc;
    }
}

torch::Tensor run(torch::Tensor a, torch::Tensor x) {
    int M = a.size(0), K = a.size(1);
    auto y = torch::empty({M, 1}, a.options());
    gemv_rows<<<(M + 255) / 256, 256>>>(a.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), M, K);
    return y;
}
"""

ext = load_inline(name="dbench_gemv", cpp_sources='torch::Tensor run(torch::Tensor a, torch::Tensor x);', cuda_sources=CUDA_SRC, functions=["run"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        return ext.run(*inputs)
