import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void row_sum_block(const float* x, float* y, int n) {
    __shared__ float part[32];
    float v = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) v += x[(size_t)blockIdx.x * n + j];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
        if (threadIdx.x == 0) y[blockIdx.x] = v;
    }
}

torch::Tensor run(torch::Tensor x) {
    int rows = x.size(0), n = x.size(1);
    auto y = torch::empty({rows}, x.options());
    row_sum_block<<<rows, 1024>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="dbench_few_rows", cpp_sources='torch::Tensor run(torch::Tensor x);', cuda_sources=CUDA_SRC, functions=["run"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        return ext.run(*inputs)
