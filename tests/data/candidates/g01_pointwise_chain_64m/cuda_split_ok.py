"""The g01 kernel written for fast builds: the CUDA source holds only kernels and a plain C++ launcher (no PyTorch
headers, so nvcc compiles it in seconds); the torch::Tensor wrapper lives in cpp_sources."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cstdint>
#include <algorithm>

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
        out[i] = make_float4(chain(v.x), chain(v.y), chain(v.z), chain(v.w));
    }
}

__global__ void chain_scalar_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t start, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = chain(x[i]);
    }
}

// Returns 0 or the CUDA error code of the launch.
int launch_chain(const float* xp, float* op, int64_t n, void* stream_ptr) {
    cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    const int threads = 256;
    int device = 0, sm_count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
    const int64_t max_blocks = (int64_t)sm_count * 16;  // grid-stride loops cover the rest
    const bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(op) % 16 == 0);
    const int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        const int64_t blocks = std::min<int64_t>((n4 + threads - 1) / threads, max_blocks);
        chain_vec4_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(
            reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(op), n4);
    }
    const int64_t start = n4 * 4;
    if (start < n) {
        const int64_t blocks = std::min<int64_t>((n - start + threads - 1) / threads, max_blocks);
        chain_scalar_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(xp, op, start, n);
    }
    return (int)cudaGetLastError();
}
"""

cpp_source = r"""
#include <c10/cuda/CUDAStream.h>

int launch_chain(const float* xp, float* op, int64_t n, void* stream);

torch::Tensor fused_chain(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    if (xc.numel() == 0) return out;
    const int err = launch_chain(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel(),
                                 c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "CUDA kernel launch failed with error ", err);
    return out;
}
"""

chain_ext = load_inline(
    name="ks_testdata_g01_pointwise_chain_split",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["fused_chain"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return chain_ext.fused_chain(x)
