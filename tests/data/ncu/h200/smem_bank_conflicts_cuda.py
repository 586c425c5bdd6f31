import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void transpose_smem(const float* x, float* y, int n) {
    __shared__ float tile[32][32];
    int bx = blockIdx.x * 32, by = blockIdx.y * 32;
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int i = ty; i < 32; i += blockDim.y) tile[i][tx] = x[(by + i) * n + bx + tx];
    __syncthreads();
    for (int i = ty; i < 32; i += blockDim.y) y[(bx + i) * n + by + tx] = tile[tx][i];
}

torch::Tensor run(torch::Tensor x) {
    int n = x.size(0);
    auto y = torch::empty_like(x);
    dim3 block(32, 8), grid(n / 32, n / 32);
    transpose_smem<<<grid, block>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(name="dbench_bank", cpp_sources='torch::Tensor run(torch::Tensor x);', cuda_sources=CUDA_SRC, functions=["run"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        return ext.run(*inputs)
