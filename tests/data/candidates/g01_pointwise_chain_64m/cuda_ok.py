import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cstdint>
#include <algorithm>
#include <cuda_runtime.h>

#define CHECK_LAUNCH()                                                                   \
    do {                                                                                \
        const cudaError_t err_ = cudaGetLastError();                                    \
        TORCH_CHECK(err_ == cudaSuccess, "CUDA kernel launch failed: ", cudaGetErrorString(err_)); \
    } while (0)

// out = tanh(gelu(x * 2 + 1)) * x, fused: one read of x and one write.
__device__ __forceinline__ float chain(float x) {
    const float y = x * 2.0f + 1.0f;
    const float g = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f));
    return tanhf(g) * x;
}

__global__ void chain_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ out, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = x[i];
        float4 r;
        r.x = chain(v.x);
        r.y = chain(v.y);
        r.z = chain(v.z);
        r.w = chain(v.w);
        out[i] = r;
    }
}

__global__ void chain_scalar_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t start, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = chain(x[i]);
    }
}

torch::Tensor fused_chain_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return out;
    const float* xp = xc.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const int threads = 256;
    int device = 0, sm_count = 0;
    TORCH_CHECK(cudaGetDevice(&device) == cudaSuccess, "cudaGetDevice failed");
    TORCH_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess,
                "cudaDeviceGetAttribute failed");
    const int64_t max_blocks = (int64_t)sm_count * 16;  // grid-stride loops cover the rest

    const bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(op) % 16 == 0);
    const int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        const int64_t blocks = std::min<int64_t>((n4 + threads - 1) / threads, max_blocks);
        chain_vec4_kernel<<<(unsigned int)blocks, threads>>>(
            reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(op), n4);
        CHECK_LAUNCH();
    }
    const int64_t start = n4 * 4;
    if (start < n) {
        const int64_t blocks = std::min<int64_t>((n - start + threads - 1) / threads, max_blocks);
        chain_scalar_kernel<<<(unsigned int)blocks, threads>>>(xp, op, start, n);
        CHECK_LAUNCH();
    }
    return out;
}
"""

cpp_source = "torch::Tensor fused_chain_cuda(torch::Tensor x);"

chain_ext = load_inline(
    name="ks_testdata_g01_pointwise_chain",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["fused_chain_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return chain_ext.fused_chain_cuda(x)
