import torch
import torch.nn as nn
import triton
import triton.language as tl

M = N = K = 4096


@triton.jit
def matmul_fp32_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                       stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Tiled (shared-memory staged) GEMM, but input_precision="ieee" keeps FP32 products on the FMA pipes.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] + k < K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] + k < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a, b):
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), device=a.device, dtype=torch.float32)
        grid = (triton.cdiv(m, 128), triton.cdiv(n, 128))
        matmul_fp32_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=32,
                                 num_warps=8, num_stages=3)
        return c


def get_inputs():
    return [torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")]


def get_init_inputs():
    return []


# ---- driver written by scripts/capture_ncu.py --------------------------------------------------------------------
# python THIS.py ncu             warm up, then run the measured forwards between cudaProfilerStart/Stop
# python THIS.py profile OUT     PyTorch-profiler run features -> OUT (JSON)
WARMUP_FORWARDS = 3
MEASURED_FORWARDS = 4
PROFILED_FORWARDS = 10


def _main(argv):
    import json
    import os
    import tempfile

    model = ModelNew(*get_init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in get_inputs()]
    with torch.no_grad():
        for _ in range(WARMUP_FORWARDS):  # compiles the Triton kernels outside the profiled range
            model(*inputs)
        torch.cuda.synchronize()
        if argv[1] == "ncu":
            torch.cuda.profiler.start()
            for _ in range(MEASURED_FORWARDS):
                model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            return
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(PROFILED_FORWARDS):
            model(*inputs)
        end.record()
        torch.cuda.synchronize()
        forward_time_us = start.elapsed_time(end) * 1000.0 / PROFILED_FORWARDS
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILED_FORWARDS):
                model(*inputs)
            torch.cuda.synchronize()
        # The Chrome trace is the most stable export across PyTorch versions: kernels have "cat": "kernel".
        fd, trace_path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        prof.export_chrome_trace(trace_path)
        with open(trace_path) as f:
            trace = json.load(f)
        os.unlink(trace_path)
        kernels = {}
        for event in trace.get("traceEvents", []):
            if str(event.get("cat", "")).lower() == "kernel" and "dur" in event:
                entry = kernels.setdefault(event["name"], {"name": event["name"], "count": 0, "total_time_us": 0.0})
                entry["count"] += 1
                entry["total_time_us"] += float(event["dur"])
        summary = {"source": "torch.profiler", "forwards": PROFILED_FORWARDS, "forward_time_us": forward_time_us,
                    "kernels": sorted(kernels.values(), key=lambda k: -k["total_time_us"])}
        with open(argv[2], "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    import sys

    _main(sys.argv)
