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
        i = torch.arange(n)
        buf = torch.stack([x[(i + j * 4099) % n] for j in range(64)], dim=1)
        idx = (torch.arange(64)[None, :] * 7 + i[:, None]) & 63
        w = (torch.arange(64, dtype=x.dtype) + 1)[None, :]
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
