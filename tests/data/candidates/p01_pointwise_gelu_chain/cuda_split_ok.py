"""The style the agents are asked for: cuda_sources hold kernels and a plain launcher (no PyTorch headers, so nvcc
compiles them in about a second); the torch::Tensor function lives in cpp_sources and gets the current stream from
Python, so the C++ unit needs no CUDA headers either."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cstdint>

__global__ void gelu_chain_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float y = x[i] * 2.0f + 1.0f;
        out[i] = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f));
    }
}

int launch_gelu_chain(const float* x, float* out, int64_t n, void* stream) {
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    gelu_chain_kernel<<<(unsigned int)blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(x, out, n);
    return (int)cudaGetLastError();
}
"""

cpp_source = r"""
int launch_gelu_chain(const float* x, float* out, int64_t n, void* stream);

torch::Tensor gelu_chain(torch::Tensor x, int64_t stream) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    if (xc.numel() == 0) return out;
    const int err = launch_gelu_chain(xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel(),
                                      reinterpret_cast<void*>(stream));
    TORCH_CHECK(err == 0, "CUDA kernel launch failed with error ", err);
    return out;
}
"""

ext = load_inline(
    name="ks_testdata_p01_gelu_chain_split",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gelu_chain"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.gelu_chain(x, torch.cuda.current_stream(x.device).cuda_stream)
