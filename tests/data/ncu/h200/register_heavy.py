import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS = 4096
COLS = 16384  # 256 MB


@triton.jit
def wide_row_normalize_kernel(x_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    # The whole 16384-wide row is held at once: 128 values per thread with 4 warps, and x and its deviations are
    # both live across the two reductions, so registers run out (and spill).
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    tl.store(y_ptr + row * n_cols + cols, d * tl.rsqrt(var + eps), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        wide_row_normalize_kernel[(rows,)](x, y, cols, 1e-5, BLOCK=16384, num_warps=4)
        return y


def get_inputs():
    return [torch.randn(ROWS, COLS, device="cuda")]


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
