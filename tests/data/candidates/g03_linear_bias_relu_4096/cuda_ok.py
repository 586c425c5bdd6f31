import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <cstdint>
#include <cuda_runtime.h>

#define CHECK_LAUNCH()                                                                   \
    do {                                                                                \
        const cudaError_t err_ = cudaGetLastError();                                    \
        TORCH_CHECK(err_ == cudaSuccess, "CUDA kernel launch failed: ", cudaGetErrorString(err_)); \
    } while (0)

// out = relu(x @ w^T + b) in fp32 (no TF32), register-blocked SIMT SGEMM.
// x: M x K row-major, w: N x K row-major (nn.Linear layout). Both operands are K-contiguous, so both tiles are
// loaded the same way (float4 along K when possible) and stored transposed in shared memory as [k][m] / [k][n].
// Block tile 128 x 128 x 8, 256 threads, each thread computes an 8 x 8 sub-tile.
constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int NTHREADS = (BM / TM) * (BN / TN);  // 256

__device__ __forceinline__ float4 load_k4(const float* __restrict__ src, int row, int rows, int k, int K, bool vec_ok) {
    // Four consecutive K-elements of row `row`, zero outside the matrix.
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < rows) {
        const float* p = src + (size_t)row * K + k;
        if (vec_ok && k + 3 < K) {
            v = *reinterpret_cast<const float4*>(p);
        } else {
            if (k + 0 < K) v.x = p[0];
            if (k + 1 < K) v.y = p[1];
            if (k + 2 < K) v.z = p[2];
            if (k + 3 < K) v.w = p[3];
        }
    }
    return v;
}

__global__ void __launch_bounds__(NTHREADS)
sgemm_bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                       float* __restrict__ out, int M, int N, int K, int vec_ok) {
    __shared__ __align__(16) float As[BK][BM];
    __shared__ __align__(16) float Bs[BK][BN];

    const int tid = threadIdx.x;
    const int block_m = blockIdx.y * BM;
    const int block_n = blockIdx.x * BN;
    const int tr = tid / (BN / TN);  // 0..15: row group of this thread's sub-tile
    const int tc = tid % (BN / TN);  // 0..15: column group

    // Loader mapping: 128 rows x 8 k = 256 float4 slots -> one float4 of x and one of w per thread.
    const int lrow = tid >> 1;        // 0..127
    const int lk = (tid & 1) * 4;     // 0 or 4

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    float ra[TM];
    float rb[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 va = load_k4(x, block_m + lrow, M, k0 + lk, K, vec_ok != 0);
        const float4 vb = load_k4(w, block_n + lrow, N, k0 + lk, K, vec_ok != 0);
        As[lk + 0][lrow] = va.x;
        As[lk + 1][lrow] = va.y;
        As[lk + 2][lrow] = va.z;
        As[lk + 3][lrow] = va.w;
        Bs[lk + 0][lrow] = vb.x;
        Bs[lk + 1][lrow] = vb.y;
        Bs[lk + 2][lrow] = vb.z;
        Bs[lk + 3][lrow] = vb.w;
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][tr * TM]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][tr * TM + 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tc * TN]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][tc * TN + 4]);
            ra[0] = a0.x; ra[1] = a0.y; ra[2] = a0.z; ra[3] = a0.w;
            ra[4] = a1.x; ra[5] = a1.y; ra[6] = a1.z; ra[7] = a1.w;
            rb[0] = b0.x; rb[1] = b0.y; rb[2] = b0.z; rb[3] = b0.w;
            rb[4] = b1.x; rb[5] = b1.y; rb[6] = b1.z; rb[7] = b1.w;
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
        }
        __syncthreads();
    }

    // Epilogue: bias + ReLU, bounds-checked stores (float4 when the whole quad is inside and aligned).
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = block_m + tr * TM + i;
        if (m >= M) continue;
#pragma unroll
        for (int j4 = 0; j4 < TN; j4 += 4) {
            const int n = block_n + tc * TN + j4;
            float* dst = out + (size_t)m * N + n;
            if (vec_ok && (N % 4 == 0) && n + 3 < N) {
                float4 r;
                r.x = fmaxf(acc[i][j4 + 0] + bias[n + 0], 0.0f);
                r.y = fmaxf(acc[i][j4 + 1] + bias[n + 1], 0.0f);
                r.z = fmaxf(acc[i][j4 + 2] + bias[n + 2], 0.0f);
                r.w = fmaxf(acc[i][j4 + 3] + bias[n + 3], 0.0f);
                *reinterpret_cast<float4*>(dst) = r;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (n + j < N) dst[j] = fmaxf(acc[i][j4 + j] + bias[n + j], 0.0f);
                }
            }
        }
    }
}

torch::Tensor linear_bias_relu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && b.dim() == 1, "x: (M, K), w: (N, K), b: (N)");
    TORCH_CHECK(x.size(1) == w.size(1) && b.size(0) == w.size(0), "shape mismatch");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto bc = b.contiguous();
    const int M = (int)xc.size(0), K = (int)xc.size(1), N = (int)wc.size(0);
    auto out = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return out;
    if (K == 0) return out.copy_(bc.unsqueeze(0).expand({M, N})).clamp_min_(0.0);
    const float* xp = xc.data_ptr<float>();
    const float* wp = wc.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(wp) % 16 == 0) &&
                         (reinterpret_cast<uintptr_t>(op) % 16 == 0);
    const int vec_ok = (aligned && K % 4 == 0) ? 1 : 0;
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    sgemm_bias_relu_kernel<<<grid, NTHREADS>>>(
        xp, wp, bc.data_ptr<float>(), op, M, N, K, vec_ok);
    CHECK_LAUNCH();
    return out;
}
"""

cpp_source = "torch::Tensor linear_bias_relu_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

linear_ext = load_inline(
    name="ks_testdata_g03_linear_bias_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_bias_relu_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_ext.linear_bias_relu_cuda(x, self.linear.weight, self.linear.bias)
