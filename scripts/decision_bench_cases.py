"""The classic kernels of the decision benchmark (scripts/capture_decision_bench.py captures them on a GPU).

Each case is a KernelBench pair - a reference problem (`Model`, `get_inputs`, `get_init_inputs`, CPU tensors) and a
candidate (`ModelNew`) that is slow for one known reason - plus the methods an expert would try first and why.
CUDA candidates keep their kernels in `kernels` as well, so they can be compile-checked without a GPU. Sizes keep
each kernel near a millisecond or less and `launch_count` small: under `--set full` ncu replays every profiled launch
~40 times, about 2.5 s per launch on the H200 (48 tiny launches took 118 s in the first capture).

Standard library only: the list imports (and is tested) without torch or a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    reference: str  # the problem file
    candidate: str  # the candidate file
    expert: tuple[str, ...]  # methods an expert would try first (knowledge-base ids)
    why: str
    kernels: str = ""  # CUDA kernels of the candidate (empty for Triton / PyTorch candidates)
    launch_count: int = 8  # ncu --launch-count: launches of the measured forward to profile


def problem(body: str, inputs: str, init: str = "[]") -> str:
    return (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n{body.strip()}\n\n\n"
            f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init}\n")  # fmt: skip


def cuda_candidate(name: str, kernels: str, wrapper: str, forward: str, init: str = "") -> str:
    """A load_inline candidate: `wrapper` is a C++ function `torch::Tensor run(...)` launching the kernels."""
    decl = wrapper.strip().split("{", 1)[0].strip() + ";"
    init_body = f"        super().__init__()\n{init}" if init else "        super().__init__()\n"
    return f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
{kernels.strip()}

{wrapper.strip()}
"""

ext = load_inline(name="{name}", cpp_sources={decl!r}, cuda_sources=CUDA_SRC, functions=["run"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, *args):
{init_body}
    def forward(self, *inputs):
        {forward}
'''


def triton_candidate(kernels: str, forward: str, init: str = "") -> str:
    init_body = f"        super().__init__()\n{init}" if init else "        super().__init__()\n"
    return f'''import torch
import torch.nn as nn
import triton
import triton.language as tl

{kernels.strip()}


class ModelNew(nn.Module):
    def __init__(self, *args):
{init_body}
    def forward(self, *inputs):
        {forward}
'''


# ---- untiled CUDA GEMM (thread per output) ---------------------------------------------------------------------------
NAIVE_GEMM_K = """
__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
        C[row * N + col] = sum;
    }
}
"""
NAIVE_GEMM_W = """
torch::Tensor run(torch::Tensor a, torch::Tensor b) {
    int M = a.size(0), K = a.size(1), N = b.size(1);
    auto c = torch::empty({M, N}, a.options());
    dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
    matmul_naive<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

# ---- thread-per-row softmax --------------------------------------------------------------------------------------
SERIAL_SOFTMAX_K = """
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
"""
ROWS_W = """
torch::Tensor run(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    KERNEL<<<(rows + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

# ---- thread-per-row prefix sum -----------------------------------------------------------------------------------
SERIAL_SCAN_K = """
__global__ void cumsum_rows(const float* x, float* y, int rows, int n) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) {
        acc += x[row * n + j];
        y[row * n + j] = acc;
    }
}
"""

# ---- thread-per-row matrix-vector product ------------------------------------------------------------------------
GEMV_K = """
__global__ void gemv_rows(const float* A, const float* x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc += A[row * K + k] * x[k];
        y[row] = acc;
    }
}
"""
GEMV_W = """
torch::Tensor run(torch::Tensor a, torch::Tensor x) {
    int M = a.size(0), K = a.size(1);
    auto y = torch::empty({M, 1}, a.options());
    gemv_rows<<<(M + 255) / 256, 256>>>(a.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), M, K);
    return y;
}
"""

# ---- shared-memory transpose without padding (32-way bank conflicts on the column reads) -------------------------
BANK_K = """
__global__ void transpose_smem(const float* x, float* y, int n) {
    __shared__ float tile[32][32];
    int bx = blockIdx.x * 32, by = blockIdx.y * 32;
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int i = ty; i < 32; i += blockDim.y) tile[i][tx] = x[(by + i) * n + bx + tx];
    __syncthreads();
    for (int i = ty; i < 32; i += blockDim.y) y[(bx + i) * n + by + tx] = tile[tx][i];
}
"""
BANK_W = """
torch::Tensor run(torch::Tensor x) {
    int n = x.size(0);
    auto y = torch::empty_like(x);
    dim3 block(32, 8), grid(n / 32, n / 32);
    transpose_smem<<<grid, block>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

# ---- a dynamically indexed per-thread array: local memory (spills) -----------------------------------------------
SPILL_K = """
__global__ void histogram_smooth(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float buf[64];
    for (int j = 0; j < 64; ++j) buf[j] = x[(i + j * 4099) % n];
    float s = 0.0f;
    for (int j = 0; j < 64; ++j) s += buf[(j * 7 + i) & 63] * (float)(j + 1);
    y[i] = s;
}
"""
SPILL_W = """
torch::Tensor run(torch::Tensor x) {
    int n = x.numel();
    auto y = torch::empty_like(x);
    histogram_smooth<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
SPILL_REF = """
class Model(nn.Module):
    def forward(self, x):
        n = x.numel()
        i = torch.arange(n, device=x.device)
        buf = torch.stack([x[(i + j * 4099) % n] for j in range(64)], dim=1)
        idx = (torch.arange(64, device=x.device)[None, :] * 7 + i[:, None]) & 63
        w = (torch.arange(64, dtype=x.dtype, device=x.device) + 1)[None, :]
        return (torch.gather(buf, 1, idx) * w).sum(dim=1)
"""

# ---- four rows of 4 Mi elements, a block per row: 4 blocks on 132 SMs -------------------------------------------
FEW_ROWS_K = """
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
"""
FEW_ROWS_W = """
torch::Tensor run(torch::Tensor x) {
    int rows = x.size(0), n = x.size(1);
    auto y = torch::empty({rows}, x.options());
    row_sum_block<<<rows, 1024>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

# ---- FP16 GEMM tiled in shared memory but multiplied on the FP32/FP16 pipes, not the tensor cores -----------------
HALF_GEMM_K = """
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
"""
HALF_GEMM_W = """
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

# ---- Triton kernels --------------------------------------------------------------------------------------------------
ELEMENTWISE_T = """
@triton.jit
def unary_kernel(x_ptr, y_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if OP == 0:
        y = x + 1.0
    elif OP == 1:
        y = x * 0.5
    elif OP == 2:
        y = tl.maximum(x, 0.0)
    else:
        y = x * x
    tl.store(y_ptr + offs, y, mask=mask)


def unary(x, op):
    y = torch.empty_like(x)
    n = x.numel()
    unary_kernel[(triton.cdiv(n, 1024),)](x, y, n, OP=op, BLOCK=1024)
    return y
"""
STRIDED_T = """
@triton.jit
def column_gather_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    # y = x[:, ::8] made contiguous; program (r, b): lanes walk one output row, reading every 8th float.
    r = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_cols // 8
    v = tl.load(x_ptr + r * n_cols + offs * 8, mask=mask)
    tl.store(y_ptr + r * (n_cols // 8) + offs, v, mask=mask)
"""
SERIAL_LAYERNORM_T = """
@triton.jit
def layernorm_serial_kernel(x_ptr, y_ptr, n, eps):
    # one program per row, one element per step: a scalar loop
    row = tl.program_id(0)
    s = 0.0
    for j in range(0, n):
        s += tl.load(x_ptr + row * n + j)
    mean = s / n
    v = 0.0
    for j in range(0, n):
        d = tl.load(x_ptr + row * n + j) - mean
        v += d * d
    rstd = 1.0 / tl.sqrt(v / n + eps)
    for j in range(0, n):
        tl.store(y_ptr + row * n + j, (tl.load(x_ptr + row * n + j) - mean) * rstd)
"""
EPILOGUE_T = """
@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, y_ptr, n_cols, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % n_cols, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x + b, 0.0), mask=mask)
"""

ROWS = "[torch.randn(4096, 512)]"  # 512 serial steps per thread: ~1 ms
CASES: tuple[Case, ...] = (
    Case("naive_gemm_cuda", "512^3 FP32 GEMM, a thread per output, no tiles (CUDA)",
         problem("class Model(nn.Module):\n    def forward(self, a, b):\n        return a @ b",
                 "[torch.randn(512, 512), torch.randn(512, 512)]"),
         cuda_candidate("dbench_naive_gemm", NAIVE_GEMM_K, NAIVE_GEMM_W, "return ext.run(*inputs)"),
         ("shared_memory_tiling", "register_blocking", "tensor_cores"),
         "Every FMA loads both operands from global memory/L1; tiles and register blocking are the first steps.",
         kernels=NAIVE_GEMM_K, launch_count=1),
    Case("serial_softmax_cuda", "row softmax of 4096x512, one thread per row, three passes (CUDA)",
         problem("class Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)", ROWS),
         cuda_candidate("dbench_serial_softmax", SERIAL_SOFTMAX_K, ROWS_W.replace("KERNEL", "softmax_rows"),
                        "return ext.run(*inputs)"),
         ("block_reduction", "warp_level_reduction"),
         "4096 threads walk their rows alone (each warp reads 32 rows: scattered sectors); a block or warp per row.",
         kernels=SERIAL_SOFTMAX_K, launch_count=1),
    Case("serial_cumsum_cuda", "row prefix sums of 4096x512, one thread per row (CUDA)",
         problem("class Model(nn.Module):\n    def forward(self, x):\n        return torch.cumsum(x, dim=1)", ROWS),
         cuda_candidate("dbench_serial_scan", SERIAL_SCAN_K, ROWS_W.replace("KERNEL", "cumsum_rows"),
                        "return ext.run(*inputs)"),
         ("parallel_scan",), "A serial scan per thread; a block scan streams each row at DRAM speed.",
         kernels=SERIAL_SCAN_K, launch_count=1),
    Case("thread_per_row_gemv_cuda", "4096x2048 FP32 matrix-vector product, a thread per row (CUDA)",
         problem("class Model(nn.Module):\n    def forward(self, a, x):\n        return a @ x",
                 "[torch.randn(4096, 2048), torch.randn(2048, 1)]"),
         cuda_candidate("dbench_gemv", GEMV_K, GEMV_W, "return ext.run(*inputs)"),
         ("warp_level_reduction", "block_reduction"),
         "Each warp reads 32 rows at once; a warp per row reads coalesced and the GEMV becomes DRAM-bound.",
         kernels=GEMV_K, launch_count=1),
    Case("smem_bank_conflicts_cuda", "8192^2 transpose through an unpadded 32x32 shared tile (CUDA)",
         problem("class Model(nn.Module):\n    def forward(self, x):\n        return x.t().contiguous()",
                 "[torch.randn(8192, 8192)]"),
         cuda_candidate("dbench_bank", BANK_K, BANK_W, "return ext.run(*inputs)"),
         ("avoid_bank_conflicts",), "Column reads of tile[tx][i] hit one bank 32 times; pad the tile to [32][33].",
         kernels=BANK_K, launch_count=1),
    Case("register_spills_cuda", "a 64-float per-thread buffer indexed at run time (local memory) (CUDA)",
         problem(SPILL_REF, "[torch.randn(1 << 20)]"),
         cuda_candidate("dbench_spill", SPILL_K, SPILL_W, "return ext.run(*inputs)"),
         ("reduce_register_pressure",), "The runtime-indexed buffer lives in local memory; keep it in registers "
         "(compile-time indices) or in shared memory.", kernels=SPILL_K, launch_count=1),
    Case("few_long_rows_cuda", "sums of 4 rows of 4 Mi floats, one block per row (CUDA)",
         problem("class Model(nn.Module):\n    def forward(self, x):\n        return x.sum(dim=1)",
                 "[torch.randn(4, 1 << 22)]"),
         cuda_candidate("dbench_few_rows", FEW_ROWS_K, FEW_ROWS_W, "return ext.run(*inputs)"),
         ("multi_block_reduction", "split_k"), "4 blocks on 132 SMs: split each row over many blocks.",
         kernels=FEW_ROWS_K, launch_count=1),
    Case("fp16_gemm_no_tensor_cores_cuda", "1024^3 FP16 GEMM tiled in shared memory, FP32 FMAs (CUDA)",
         problem("class Model(nn.Module):\n    def forward(self, a, b):\n        return a @ b",
                 "[torch.randn(1024, 1024).half(), torch.randn(1024, 1024).half()]"),
         cuda_candidate("dbench_half_gemm", HALF_GEMM_K, HALF_GEMM_W, "return ext.run(*inputs)"),
         ("tensor_cores",), "16-bit operands multiplied on scalar pipes: wmma/mma tensor cores are ~15x faster.",
         kernels=HALF_GEMM_K, launch_count=1),
    Case("unfused_elementwise_chain_triton", "((x + 1) * 0.5).relu()^2 as four Triton kernels over 16 Mi floats",
         problem("class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu((x + 1) * 0.5) ** 2",
                 "[torch.randn(1 << 24)]"),
         triton_candidate(ELEMENTWISE_T, "x = inputs[0]\n        for op in range(4):\n            x = unary(x, op)\n"
                          "        return x"),
         ("kernel_fusion",), "Four kernels each stream 64 MB in and out; one fused kernel moves it once.",
         launch_count=4),
    Case("strided_gather_triton", "x[:, ::8] of a 8192x8192 matrix, lanes 32 bytes apart (Triton)",
         problem("class Model(nn.Module):\n    def forward(self, x):\n        return x[:, ::8].contiguous()",
                 "[torch.randn(8192, 8192)]"),
         triton_candidate(STRIDED_T, "x = inputs[0]\n        y = torch.empty((x.shape[0], x.shape[1] // 8), "
                          "device=x.device)\n        column_gather_kernel[(x.shape[0], triton.cdiv(x.shape[1] // 8, "
                          "256))](x, y, x.shape[0], x.shape[1], BLOCK=256)\n        return y"),
         ("coalesce_memory_access", "layout_transformation"),
         "Each lane reads 4 useful bytes of a 32-byte sector; read rows contiguously and select in registers.",
         launch_count=1),
    Case("serial_layernorm_triton", "layer norm of 2048x256 rows with a scalar loop per program (Triton)",
         problem("class Model(nn.Module):\n    def forward(self, x):\n        return F.layer_norm(x, x.shape[1:])",
                 "[torch.randn(2048, 256)]"),
         triton_candidate(SERIAL_LAYERNORM_T, "x = inputs[0]\n        y = torch.empty_like(x)\n        "
                          "layernorm_serial_kernel[(x.shape[0],)](x, y, x.shape[1], 1e-5)\n        return y"),
         ("block_reduction",), "A program per row adds one scalar per step; load the row as a block and tl.sum it.",
         launch_count=1),
    Case("library_gemm_with_epilogue", "linear layer: torch.mm, then a separate Triton bias + ReLU kernel",
         problem("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                 "        self.fc = nn.Linear(2048, 2048)\n\n    def forward(self, x):\n"
                 "        return torch.relu(self.fc(x))", "[torch.randn(2048, 2048)]"),
         triton_candidate(EPILOGUE_T, "x = inputs[0]\n        h = torch.mm(x, self.fc.weight.t())\n"
                          "        y = torch.empty_like(h)\n        n = h.numel()\n"
                          "        bias_relu_kernel[(triton.cdiv(n, 1024),)](h, self.fc.bias, y, h.shape[1], n, "
                          "BLOCK=1024)\n        return y",
                          init="        self.fc = nn.Linear(2048, 2048)  # the reference's parameters, by name\n"),
         ("epilogue_fusion", "keep_vendor_kernel"),
         "cuBLAS does the product well; the separate bias + ReLU pass re-reads 16 MB: fuse it into the epilogue.",
         launch_count=2),
    Case("tiny_launches_torch", "64 tiny PyTorch ops per forward on a 64x64 tensor",
         problem("class Model(nn.Module):\n    def forward(self, x):\n        for _ in range(16):\n"
                 "            x = torch.relu(torch.sin(x) * 1.01 + 0.5)\n        return x", "[torch.randn(64, 64)]"),
         "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
         "        for _ in range(16):\n            x = torch.sin(x)\n            x = x * 1.01\n"
         "            x = x + 0.5\n            x = torch.relu(x)\n        return x\n",
         ("cuda_graphs", "kernel_fusion"), "~1 us kernels and a launch each: the host is the bottleneck.",
         launch_count=16),  # the profiler counts all 64 per forward; ncu needs only a sample
)  # fmt: skip


# ==== after-candidates: each case with its first expert method applied, and nothing else of note ===================
# scripts/method_check.py builds each pair (the case's candidate = before, AFTER[name].candidate = after) on a GPU,
# times both and checks that the metrics named in the method's expected_metric_change move the way the card says.


@dataclass(frozen=True)
class After:
    method: str  # the case's first expert method (a methods.yaml id)
    candidate: str  # ModelNew with that method applied
    note: str  # what the after-kernel does
    kernels: str = ""  # CUDA kernels of the after-candidate (compile-checked with nvcc without a GPU)
    cpu_inputs: str = ""  # small inputs for the CPU smoke run (Triton interpreter); "" keeps get_inputs()


TILED_GEMM_K = """
#define TILE 16
__global__ void matmul_smem_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = sum;
}
"""
TILED_GEMM_W = NAIVE_GEMM_W.replace("matmul_naive", "matmul_smem_tiled")

BLOCK_SOFTMAX_K = """
#define RED 128
__device__ float block_reduce(float v, float* red, bool take_max) {
    // a tree over the block's threads in shared memory; every thread gets the result
    int t = threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int s = RED / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = take_max ? fmaxf(red[t], red[t + s]) : red[t] + red[t + s];
        __syncthreads();
    }
    float r = red[0];
    __syncthreads();
    return r;
}

__global__ void softmax_block_rows(const float* x, float* y, int cols) {
    __shared__ float red[RED];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += RED) m = fmaxf(m, xr[j]);
    m = block_reduce(m, red, true);
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += RED) s += expf(xr[j] - m);
    s = block_reduce(s, red, false);
    for (int j = threadIdx.x; j < cols; j += RED) yr[j] = expf(xr[j] - m) / s;
}
"""
BLOCK_SOFTMAX_W = """
torch::Tensor run(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto y = torch::empty_like(x);
    softmax_block_rows<<<rows, RED>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

BLOCK_SCAN_K = """
__global__ void cumsum_block_scan(const float* x, float* y, int n) {
    // a block per row, a thread per element: Hillis-Steele inclusive scan, double-buffered in shared memory
    extern __shared__ float buf[];
    int t = threadIdx.x;
    size_t base = (size_t)blockIdx.x * n;
    float* src = buf;
    float* dst = buf + n;
    src[t] = x[base + t];
    __syncthreads();
    for (int off = 1; off < n; off <<= 1) {
        float v = src[t];
        if (t >= off) v += src[t - off];
        dst[t] = v;
        __syncthreads();
        float* tmp = src;
        src = dst;
        dst = tmp;
    }
    y[base + t] = src[t];
}
"""
BLOCK_SCAN_W = """
torch::Tensor run(torch::Tensor x) {
    int rows = x.size(0), n = x.size(1);
    TORCH_CHECK(n >= 1 && n <= 1024, "a block per row: at most 1024 elements per row");
    auto y = torch::empty_like(x);
    cumsum_block_scan<<<rows, n, 2 * n * sizeof(float)>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

WARP_GEMV_K = """
__global__ void gemv_warp_rows(const float* A, const float* x, float* y, int M, int K) {
    // a warp per row: the lanes read neighbouring elements, then a shuffle reduction
    int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (row >= M) return;  // uniform per warp
    const float* a = A + (size_t)row * K;
    float acc = 0.0f;
    for (int k = lane; k < K; k += 32) acc += a[k] * x[k];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
    if (lane == 0) y[row] = acc;
}
"""
WARP_GEMV_W = """
torch::Tensor run(torch::Tensor a, torch::Tensor x) {
    int M = a.size(0), K = a.size(1);
    auto y = torch::empty({M, 1}, a.options());
    gemv_warp_rows<<<(M + 7) / 8, 256>>>(a.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), M, K);
    return y;
}
"""

PADDED_BANK_K = BANK_K.replace("__shared__ float tile[32][32];", "__shared__ float tile[32][33];  // padded")
PADDED_BANK_K = PADDED_BANK_K.replace("transpose_smem", "transpose_smem_padded")
PADDED_BANK_W = BANK_W.replace("transpose_smem", "transpose_smem_padded")

NO_SPILL_K = """
__global__ void histogram_smooth_streamed(const float* x, float* y, int n) {
    // no per-thread array: each loaded value is used at once. The reference's j-th product reads
    // buf[k] with k = (7 j + i) mod 64, so buf[k] gets the weight j + 1 with j = 55 (k - i) mod 64 (55 = 7^-1 mod 64).
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
#pragma unroll 4
    for (int k = 0; k < 64; ++k) s += x[(i + k * 4099) % n] * (float)((((k - i) * 55) & 63) + 1);
    y[i] = s;
}
"""
NO_SPILL_W = SPILL_W.replace("histogram_smooth", "histogram_smooth_streamed")

MULTI_BLOCK_K = """
#define THREADS 256
__device__ float block_sum(float v) {
    __shared__ float part[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < THREADS / 32 ? part[threadIdx.x] : 0.0f;
    if (threadIdx.x < 32)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    return v;  // valid in thread 0
}

__global__ void row_sum_partial(const float* x, float* partial, int n, int chunks) {
    // grid (chunks, rows): each block sums one chunk of its row
    int row = blockIdx.y, chunk = blockIdx.x;
    size_t len = (n + chunks - 1) / chunks, begin = (size_t)chunk * len, end = min((size_t)n, begin + len);
    const float* xr = x + (size_t)row * n;
    float v = 0.0f;
    for (size_t j = begin + threadIdx.x; j < end; j += THREADS) v += xr[j];
    v = block_sum(v);
    if (threadIdx.x == 0) partial[row * chunks + chunk] = v;
}

__global__ void row_sum_final(const float* partial, float* y, int chunks) {
    float v = 0.0f;
    for (int j = threadIdx.x; j < chunks; j += THREADS) v += partial[blockIdx.x * chunks + j];
    v = block_sum(v);
    if (threadIdx.x == 0) y[blockIdx.x] = v;
}
"""
MULTI_BLOCK_W = """
torch::Tensor run(torch::Tensor x) {
    int rows = x.size(0), n = x.size(1), chunks = 256;
    auto partial = torch::empty({rows, chunks}, x.options());
    auto y = torch::empty({rows}, x.options());
    row_sum_partial<<<dim3(chunks, rows), THREADS>>>(x.data_ptr<float>(), partial.data_ptr<float>(), n, chunks);
    row_sum_final<<<rows, THREADS>>>(partial.data_ptr<float>(), y.data_ptr<float>(), chunks);
    return y;
}
"""

WMMA_GEMM_K = """
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
__global__ void matmul_half_wmma(const __half* A, const __half* B, __half* C, int n) {
    // 4 warps per block, a 32x32 tile of C; each warp multiplies one 16x16 tile on the tensor cores (FP32 accumulate)
    __shared__ __align__(32) float out[4][16 * 16];  // wmma stores need 256-bit alignment
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int row = blockIdx.y * 32 + (warp >> 1) * 16, col = blockIdx.x * 32 + (warp & 1) * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < n; k += 16) {
        wmma::load_matrix_sync(a, A + (size_t)row * n + k, n);
        wmma::load_matrix_sync(b, B + (size_t)k * n + col, n);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(out[warp], acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) C[(size_t)(row + e / 16) * n + col + e % 16] = __float2half(out[warp][e]);
}
"""
WMMA_GEMM_W = """
torch::Tensor run(torch::Tensor a, torch::Tensor b) {
    int n = a.size(0);
    TORCH_CHECK(n % 32 == 0, "n must be a multiple of 32");
    auto c = torch::empty({n, n}, a.options());
    matmul_half_wmma<<<dim3(n / 32, n / 32), 128>>>(reinterpret_cast<const __half*>(a.data_ptr<at::Half>()),
                                                    reinterpret_cast<const __half*>(b.data_ptr<at::Half>()),
                                                    reinterpret_cast<__half*>(c.data_ptr<at::Half>()), n);
    return c;
}
"""

FUSED_CHAIN_T = """
@triton.jit
def fused_chain_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.maximum((x + 1.0) * 0.5, 0.0)
    tl.store(y_ptr + offs, y * y, mask=mask)
"""
COALESCED_GATHER_T = """
@triton.jit
def column_gather_coalesced_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    # the same y = x[:, ::8], but each program reads its BLOCK x 8 span of the row contiguously and keeps column 0
    r = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    lane = tl.arange(0, 8)
    mask = offs < n_cols // 8
    v = tl.load(x_ptr + r * n_cols + offs[:, None] * 8 + lane[None, :], mask=mask[:, None], other=0.0)
    first = tl.sum(tl.where(lane[None, :] == 0, v, 0.0), axis=1)
    tl.store(y_ptr + r * (n_cols // 8) + offs, first, mask=mask)
"""
BLOCK_LAYERNORM_T = """
@triton.jit
def layernorm_block_kernel(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    # one program per row, the row loaded as one block and reduced with tl.sum
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
    tl.store(y_ptr + row * n + offs, d * rstd, mask=mask)
"""
EPILOGUE_AFTER = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.fc = nn.Linear(2048, 2048)  # the reference's parameters, by name

    def forward(self, x):
        # the vendor GEMM with the bias and the ReLU in its epilogue (cuBLASLt RELU_BIAS): one kernel
        return torch._addmm_activation(self.fc.bias, x, self.fc.weight.t())
"""
GRAPH_AFTER = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.graph = None
        self.key = None

    @staticmethod
    def body(x):
        for _ in range(16):
            x = torch.sin(x)
            x = x * 1.01
            x = x + 0.5
            x = torch.relu(x)
        return x

    def forward(self, x):
        if not x.is_cuda:
            return self.body(x)
        key = (x.shape, x.dtype, x.device)
        if self.key != key:  # capture the same 64 kernels once per input shape, then replay them
            self.static_in = x.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self.body(self.static_in)  # warm-up outside the capture
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_out = self.body(self.static_in)
            self.key = key
        self.static_in.copy_(x)
        self.graph.replay()
        return self.static_out  # the graph's output buffer: overwritten by the next call
"""

AFTER: dict[str, After] = {
    "naive_gemm_cuda": After(
        "shared_memory_tiling",
        cuda_candidate("mcheck_tiled_gemm", TILED_GEMM_K, TILED_GEMM_W, "return ext.run(*inputs)"),
        "the same thread per output and 16x16 blocks, with A and B staged through 16x16 shared-memory tiles",
        kernels=TILED_GEMM_K),
    "serial_softmax_cuda": After(
        "block_reduction",
        cuda_candidate("mcheck_block_softmax", BLOCK_SOFTMAX_K, BLOCK_SOFTMAX_W, "return ext.run(*inputs)"),
        "a 128-thread block per row; max and sum by a shared-memory tree reduction, the same three passes",
        kernels=BLOCK_SOFTMAX_K),
    "serial_cumsum_cuda": After(
        "parallel_scan",
        cuda_candidate("mcheck_block_scan", BLOCK_SCAN_K, BLOCK_SCAN_W, "return ext.run(*inputs)"),
        "a block per row, a thread per element: Hillis-Steele inclusive scan in double-buffered shared memory",
        kernels=BLOCK_SCAN_K),
    "thread_per_row_gemv_cuda": After(
        "warp_level_reduction",
        cuda_candidate("mcheck_warp_gemv", WARP_GEMV_K, WARP_GEMV_W, "return ext.run(*inputs)"),
        "a warp per row: lanes stride the row (coalesced), __shfl_down_sync sums the 32 partials",
        kernels=WARP_GEMV_K),
    "smem_bank_conflicts_cuda": After(
        "avoid_bank_conflicts",
        cuda_candidate("mcheck_padded_bank", PADDED_BANK_K, PADDED_BANK_W, "return ext.run(*inputs)"),
        "the same transpose with the shared tile padded to [32][33]: column reads hit 32 banks",
        kernels=PADDED_BANK_K),
    "register_spills_cuda": After(
        "reduce_register_pressure",
        cuda_candidate("mcheck_no_spill", NO_SPILL_K, NO_SPILL_W, "return ext.run(*inputs)"),
        "no runtime-indexed local array: the sum is reordered over the loaded values (weights computed in place), "
        "each value used as soon as it is loaded", kernels=NO_SPILL_K),
    "few_long_rows_cuda": After(
        "multi_block_reduction",
        cuda_candidate("mcheck_multi_block", MULTI_BLOCK_K, MULTI_BLOCK_W, "return ext.run(*inputs)"),
        "each row split over 256 blocks (1024 blocks of 256 threads) writing partial sums, a second small kernel "
        "adds the 256 partials of each row", kernels=MULTI_BLOCK_K),
    "fp16_gemm_no_tensor_cores_cuda": After(
        "tensor_cores",
        cuda_candidate("mcheck_wmma_gemm", WMMA_GEMM_K, WMMA_GEMM_W, "return ext.run(*inputs)"),
        "WMMA 16x16x16 FP16 fragments with FP32 accumulators, a warp per 16x16 output tile, operands straight "
        "from global memory (no shared-memory staging)", kernels=WMMA_GEMM_K),
    "unfused_elementwise_chain_triton": After(
        "kernel_fusion",
        triton_candidate(FUSED_CHAIN_T, "x = inputs[0]\n        y = torch.empty_like(x)\n        n = x.numel()\n"
                         "        fused_chain_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)\n        return y"),
        "the four elementwise ops in one Triton kernel (same BLOCK of 1024): one read and one write",
        cpu_inputs="[torch.randn(5000)]"),
    "strided_gather_triton": After(
        "coalesce_memory_access",
        triton_candidate(COALESCED_GATHER_T, "x = inputs[0]\n        y = torch.empty((x.shape[0], x.shape[1] // 8), "
                         "device=x.device)\n        column_gather_coalesced_kernel[(x.shape[0], "
                         "triton.cdiv(x.shape[1] // 8, 256))](x, y, x.shape[0], x.shape[1], BLOCK=256)\n"
                         "        return y"),
        "the same grid; each program loads its 256x8 span of the row contiguously and keeps column 0 in registers",
        cpu_inputs="[torch.randn(4, 2048 + 64)]"),
    "serial_layernorm_triton": After(
        "block_reduction",
        triton_candidate(BLOCK_LAYERNORM_T, "x = inputs[0]\n        y = torch.empty_like(x)\n        "
                         "layernorm_block_kernel[(x.shape[0],)](x, y, x.shape[1], 1e-5, "
                         "BLOCK=triton.next_power_of_2(x.shape[1]))\n        return y"),
        "the same program per row, the row loaded as one block; mean and variance by tl.sum",
        cpu_inputs="[torch.randn(3, 256)]"),
    "library_gemm_with_epilogue": After(
        "epilogue_fusion", EPILOGUE_AFTER,
        "torch._addmm_activation: cuBLASLt's GEMM with the bias + ReLU epilogue, one kernel instead of two",
        cpu_inputs="[torch.randn(8, 2048)]"),
    "tiny_launches_torch": After(
        "cuda_graphs", GRAPH_AFTER,
        "the same 64 PyTorch ops captured once in a CUDA graph and replayed (input copied into the graph's buffer)"),
}  # fmt: skip
