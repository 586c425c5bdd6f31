import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
__global__ void matmul_half_tiled(const __half* A, const __half* B, __half* C, int n) {
    __shared__ __half As[16][16];
    __shared__ __half Bs[16][16];
    int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int t = 0; t < n / 16; ++t) {
        As[ty][tx] = A[row * n + t * 16 + tx];
        Bs[ty][tx] = B[(t * 16 + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += __half2float(As[ty][k]) * __half2float(Bs[k][tx]);
        __syncthreads();
    }
    C[row * n + col] = __float2half(acc);
}

torch::Tensor run(torch::Tensor a, torch::Tensor b) {
    int n = a.size(0);
    auto c = torch::empty({n, n}, a.options());
    dim3 block(16, 16), grid(n / 16, n / 16);
    matmul_half_tiled<<<grid, block>>>(reinterpret_cast<const __half*>(a.data_ptr<at::Half>()),
                                       reinterpret_cast<const __half*>(b.data_ptr<at::Half>()),
                                       reinterpret_cast<__half*>(c.data_ptr<at::Half>()), n);
    return c;
}
"""

ext = load_inline(name="dbench_half_gemm", cpp_sources='torch::Tensor run(torch::Tensor a, torch::Tensor b);', cuda_sources=CUDA_SRC, functions=["run"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        return ext.run(*inputs)
