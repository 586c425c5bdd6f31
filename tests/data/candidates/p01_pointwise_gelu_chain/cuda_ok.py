import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cuda_runtime.h>

#define CHECK_LAUNCH()                                                                   \
    do {                                                                                \
        const cudaError_t err_ = cudaGetLastError();                                    \
        TORCH_CHECK(err_ == cudaSuccess, "CUDA kernel launch failed: ", cudaGetErrorString(err_)); \
    } while (0)

__global__ void gelu_chain_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float y = x[i] * 2.0f + 1.0f;
        out[i] = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f));
    }
}

torch::Tensor gelu_chain_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    gelu_chain_kernel<<<(unsigned int)blocks, threads>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), n);
    CHECK_LAUNCH();
    return out;
}
"""

cpp_source = "torch::Tensor gelu_chain_cuda(torch::Tensor x);"

gelu_chain = load_inline(
    name="ks_testdata_p01_gelu_chain",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gelu_chain_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_chain.gelu_chain_cuda(x)
