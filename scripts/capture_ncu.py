#!/usr/bin/env python
"""Capture Nsight Compute raw CSVs for kernels with known bottlenecks (test data for the decision policy).

Run on a GPU machine with ncu on PATH (no network needed):

    python scripts/capture_ncu.py --out tests/data/ncu/h200

For each scenario it writes a small self-contained program (a KernelBench-style ModelNew in Triton or PyTorch, plus
a driver), then:
  1. (only where the scenario asks for run features, or with --profile-all) runs it once under the PyTorch
     profiler and writes SCENARIO.run_features.json: kernel names, launch counts and times per forward;
  2. runs it under ncu - warm-up forwards happen before cudaProfilerStart, so with --profile-from-start off only
     the measured forwards are seen; --launch-skip / --launch-count limit the launches profiled - exporting
     reports/SCENARIO.ncu-rep;
  3. exports the raw page: `ncu --import reports/SCENARIO.ncu-rep --csv --page raw > SCENARIO.csv`.
Also written: SCENARIO.py (the program; usable as `--code` for `kernelskill memory explain`), SCENARIO.log (all
ncu output) and manifest.json (environment, exact commands, status, expected decision per scenario).

A failing scenario prints ncu's full output and the others go on. Each step has a time limit and the whole run
has a budget (--budget-s, default 270 s); scenarios that would exceed it are reported as skipped.

This file uses only the standard library, so it imports (and is tested) without torch, triton or a GPU.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    body: str  # the program without its driver: kernels, ModelNew, get_inputs, get_init_inputs
    expected_bottlenecks: tuple[str, ...]  # what an expert would call it (first = most likely)
    must_allow: tuple[str, ...]  # methods the decision has to allow
    must_not_allow: tuple[str, ...] = ()
    launch_skip: int = 1  # profiled-range launches to skip (extra warm-up)
    launch_count: int = 2  # launches to profile
    warmup_forwards: int = 3
    measured_forwards: int = 4  # forwards inside cudaProfilerStart/Stop; must cover skip + count launches
    run_features: bool = False  # also record PyTorch-profiler run features


_TRITON_HEADER = """import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

STREAMING = _TRITON_HEADER + '''
N = 64 * 1024 * 1024  # 64 Mi fp32 = 256 MB in, 256 MB out: far beyond the 50 MB L2


@triton.jit
def scale_shift_kernel(x_ptr, y_ptr, n, alpha, beta, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * alpha + beta, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        scale_shift_kernel[(triton.cdiv(n, 4096),)](x, y, n, 2.0, 1.0, BLOCK=4096, num_warps=8)
        return y


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []
'''

STRIDED = _TRITON_HEADER + '''
ROWS = COLS = 8192  # 256 MB


@triton.jit
def transpose_naive_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    # Program (r, b) writes part of output row r, i.e. input column r: the loads walk down a column, n_cols apart,
    # so each warp-wide load touches 32 sectors to use 4 bytes of each; the stores are contiguous.
    r = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_rows
    v = tl.load(x_ptr + offs * n_cols + r, mask=mask)
    tl.store(y_ptr + r * n_rows + offs, v, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        n_rows, n_cols = x.shape
        y = torch.empty((n_cols, n_rows), device=x.device, dtype=x.dtype)
        grid = (n_cols, triton.cdiv(n_rows, 1024))
        transpose_naive_kernel[grid](x, y, n_rows, n_cols, BLOCK=1024, num_warps=4)
        return y


def get_inputs():
    return [torch.randn(ROWS, COLS, device="cuda")]


def get_init_inputs():
    return []
'''

NAIVE_GEMM = _TRITON_HEADER + '''
M = N = K = 1024


@triton.jit
def matmul_naive_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_N: tl.constexpr):
    # One output row segment per program, one scalar of A times a row of B per step: no tiles, no reuse on chip.
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + row * K + k)
        b = tl.load(b_ptr + k * N + cols, mask=mask, other=0.0)
        acc += a * b
    tl.store(c_ptr + row * N + cols, acc, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), device=a.device, dtype=torch.float32)
        matmul_naive_kernel[(m, triton.cdiv(n, 128))](a, b, c, m, n, k, BLOCK_N=128, num_warps=4)
        return c


def get_inputs():
    return [torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")]


def get_init_inputs():
    return []
'''

TILED_GEMM_FP32 = _TRITON_HEADER + '''
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
'''

ROW_REDUCTION = _TRITON_HEADER + '''
ROWS = COLS = 8192  # 256 MB


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=torch.float32)
        row_sum_kernel[(rows,)](x, y, cols, BLOCK=1024, num_warps=4)
        return y


def get_inputs():
    return [torch.randn(ROWS, COLS, device="cuda")]


def get_init_inputs():
    return []
'''

MANY_TINY_LAUNCHES = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # 48 tiny elementwise ops on a 64x64 tensor: each kernel runs ~2 us, far less than a launch costs.
    def forward(self, x):
        for _ in range(12):
            x = torch.sin(x)
            x = x * 1.01
            x = x + 0.5
            x = torch.relu(x)
        return x


def get_inputs():
    return [torch.randn(64, 64, device="cuda")]


def get_init_inputs():
    return []
"""

REGISTER_HEAVY = _TRITON_HEADER + '''
ROWS = 4096
COLS = 16384  # 256 MB


@triton.jit
def wide_row_normalize_kernel(x_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    # The whole 16384-wide row is held at once: 128 values per thread with 4 warps, and x and its deviations are
    # both live across the two reductions, so register use is high (189 per thread on an H200, 12.5 % occupancy).
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
'''

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("streaming_elementwise", "y = 2x + 1 over 64 Mi floats (Triton)", STREAMING,
             ("memory_bandwidth",), must_allow=("algebraic_simplification",),
             must_not_allow=("shared_memory_tiling", "tensor_cores", "increase_occupancy")),
    Scenario("strided_transpose", "naive transpose: column-wise loads, row-wise stores (Triton)", STRIDED,
             ("uncoalesced_access",), must_allow=("transpose_via_shared_memory", "coalesce_memory_access"),
             must_not_allow=("tensor_cores", "vectorize_memory_access")),
    # Measured on the H200: SM 75 % (issue slots 76 %, ALU 62 %, LSU 66 %, FMA only 27 %) against L1 65 %, L2 19 %,
    # DRAM 0.4 %, occupancy 93 %. An untiled GEMM is not memory-bound here: every FMA needs its own load and address
    # arithmetic, and those instructions fill the SM - compute_throughput, cured by the same tiling and register
    # blocking (the first expectation, memory bandwidth or latency, was a guess made before any capture).
    # Since issue 16 the policy names the structure first: an untiled matrix product is untiled_matmul whatever unit
    # its counters make busiest (the same methods - tiling, register blocking - lead).
    Scenario("naive_gemm", "1024^3 FP32 GEMM, scalar multiply-adds, no tiles (Triton)", NAIVE_GEMM,
             ("untiled_matmul", "compute_throughput"), must_allow=("shared_memory_tiling", "register_blocking"),
             must_not_allow=("increase_occupancy", "vectorize_memory_access", "loop_unrolling")),
    Scenario("tiled_gemm_fp32", "4096^3 tiled FP32 GEMM, tl.dot with input_precision='ieee' (Triton)",
             TILED_GEMM_FP32, ("tensor_core_underuse",), must_allow=("tensor_cores",),
             must_not_allow=("vectorize_memory_access",)),
    Scenario("row_reduction", "row sums of an 8192x8192 FP32 matrix (Triton)", ROW_REDUCTION,
             ("memory_bandwidth",), must_allow=(), must_not_allow=("tensor_cores", "shared_memory_tiling")),
    Scenario("many_tiny_launches", "48 tiny PyTorch ops per forward on a 64x64 tensor", MANY_TINY_LAUNCHES,
             ("launch_overhead",), must_allow=("cuda_graphs", "kernel_fusion"),
             must_not_allow=("tensor_cores", "shared_memory_tiling"),
             launch_skip=0, launch_count=48, warmup_forwards=3, measured_forwards=2, run_features=True),
    # Measured on the H200: 189 registers per thread cap occupancy at 12.5 % (2 blocks of 4 warps per SM), but nothing
    # spills (no local-memory traffic) and DRAM runs at 81 % of peak, 3.9 TB/s - the same as the streaming kernel at
    # 77 % occupancy. Occupancy is not what limits it; the kernel sits at the DRAM roofline, where fewer registers
    # or more warps cannot help (the first expectation, occupancy_limited with reduce_register_pressure, assumed
    # spills that did not happen).
    Scenario("register_heavy", "16384-wide row normalization held in registers (Triton)", REGISTER_HEAVY,
             ("memory_bandwidth",), must_allow=(),
             must_not_allow=("reduce_register_pressure", "increase_occupancy", "loop_unrolling", "thread_coarsening")),
)  # fmt: skip

DRIVER = '''

# ---- driver written by scripts/capture_ncu.py --------------------------------------------------------------------
# python THIS.py ncu             warm up, then run the measured forwards between cudaProfilerStart/Stop
# python THIS.py profile OUT     PyTorch-profiler run features -> OUT (JSON)
WARMUP_FORWARDS = {warmup}
MEASURED_FORWARDS = {measured}
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
        kernels = {{}}
        for event in trace.get("traceEvents", []):
            if str(event.get("cat", "")).lower() == "kernel" and "dur" in event:
                entry = kernels.setdefault(event["name"], {{"name": event["name"], "count": 0, "total_time_us": 0.0}})
                entry["count"] += 1
                entry["total_time_us"] += float(event["dur"])
        summary = {{"source": "torch.profiler", "forwards": PROFILED_FORWARDS, "forward_time_us": forward_time_us,
                    "kernels": sorted(kernels.values(), key=lambda k: -k["total_time_us"])}}
        with open(argv[2], "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    import sys

    _main(sys.argv)
'''


def scenario_source(s: Scenario) -> str:
    return s.body + DRIVER.format(warmup=s.warmup_forwards, measured=s.measured_forwards)


def ncu_profile_command(ncu: str, python: str, program: Path, report: Path, s: Scenario) -> list[str]:
    return [ncu, "--set", "full", "--clock-control", "none", "--target-processes", "all",
            "--profile-from-start", "off", "--launch-skip", str(s.launch_skip), "--launch-count", str(s.launch_count),
            "--force-overwrite", "--export", str(report), python, str(program), "ncu"]  # fmt: skip


def ncu_import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw"]


@dataclass
class StepResult:
    command: list[str]
    returncode: int | None  # None: timed out
    seconds: float
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_step(command: list[str], timeout: float, cwd: Path) -> StepResult:
    """Run a command in its own process group, so a timeout kills ncu and the program it launched."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    except OSError as exc:
        return StepResult(command, 127, time.monotonic() - start, "", f"cannot start {command[0]!r}: {exc}")
    try:
        out, err = proc.communicate(timeout=max(timeout, 1.0))
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        code = None
    return StepResult(command, code, time.monotonic() - start, out, err)


# Milliseconds per unit of gpu__time_duration. ncu 2025.3 writes "ns" / "us" / "ms" / "s"; older releases wrote
# "nsecond" / "usecond" / "msecond" / "second". A unit not listed here is an error: guessing one (this table used to
# fall back to nanoseconds) made an 0.13 ms kernel read as 0.00013 ms.
_TIME_UNITS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3,
               "second": 1e3}  # fmt: skip


def time_unit_ms(unit: str) -> float:
    """Milliseconds per `unit` as ncu writes it in the raw page's units line."""
    factor = _TIME_UNITS.get(unit.strip())
    if factor is None:
        known = ", ".join(repr(u) for u in _TIME_UNITS)
        raise ValueError(f"gpu__time_duration.sum has unit {unit!r}, not a time unit this script knows ({known})")
    return factor


def summarize_csv(text: str) -> dict[str, object]:
    """Kernels, launches and the hottest kernel's time per launch (ms) in a raw-page CSV."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no raw-page header (a line starting with \"ID\") in ncu's output")
    rows = [r for r in csv.reader(io.StringIO("\n".join(lines[start:]))) if r]
    header, body = rows[0], rows[1:]
    units = body.pop(0) if body and body[0] and body[0][0] == "" else [""] * len(header)
    name_col = header.index("Kernel Name")
    time_col = header.index("gpu__time_duration.sum")
    scale = time_unit_ms(units[time_col])
    per_kernel: dict[str, list[float]] = {}
    for r in body:
        if len(r) == len(header):
            per_kernel.setdefault(r[name_col], []).append(float(r[time_col].replace(",", "")) * scale)
    if not per_kernel:
        raise ValueError("the CSV has no kernel rows")
    hot = max(per_kernel, key=lambda k: sum(per_kernel[k]))
    return {"kernels": len(per_kernel), "launches": sum(len(v) for v in per_kernel.values()), "hot_kernel": hot,
            "hot_ms": sum(per_kernel[hot]) / len(per_kernel[hot])}  # fmt: skip


@dataclass
class Outcome:
    name: str
    status: str = "skipped"
    kernels: int = 0
    launches: int = 0
    hot_kernel: str = ""
    hot_ms: float | None = None
    seconds: float = 0.0
    commands: list[list[str]] = field(default_factory=list)
    error: str = ""


def capture_scenario(s: Scenario, out: Path, work: Path, ncu: str, python: str, timeout: float, deadline: float,
                     profile: bool) -> Outcome:  # fmt: skip
    """Profile one scenario; every step gets `timeout` seconds but none runs past `deadline` (time.monotonic)."""
    result = Outcome(s.name)
    program = work / f"{s.name}.py"
    program.write_text(scenario_source(s))
    shutil.copy(program, out / f"{s.name}.py")
    log = [f"# scenario {s.name}: {s.description}"]
    t0 = time.monotonic()

    def record(step: StepResult, label: str) -> None:
        result.commands.append(step.command)
        log.append(f"\n$ {' '.join(step.command)}\n# {label}: exit {step.returncode} after {step.seconds:.1f}s")
        log.append(f"--- stdout ---\n{step.stdout}\n--- stderr ---\n{step.stderr}")

    def fail(step: StepResult, label: str, earlier: StepResult | None = None) -> Outcome:
        result.status = f"timeout ({label})" if step.returncode is None else f"failed ({label})"
        result.error = step.stderr or step.stdout
        shown = [earlier, step] if earlier is not None else [step]
        for st in shown:  # ncu's full output: its error messages are the most useful thing to see
            print(f"\n[{s.name}] {'timed out' if st.returncode is None else f'exit {st.returncode}'}: "
                  f"{' '.join(st.command)}\n--- stdout ---\n{st.stdout}\n--- stderr ---\n{st.stderr}",
                  file=sys.stderr, flush=True)  # fmt: skip
        return result

    def limit() -> float:
        return max(1.0, min(timeout, deadline - time.monotonic()))

    try:
        if profile or s.run_features:
            features = out / f"{s.name}.run_features.json"
            step = run_step([python, str(program), "profile", str(features)], limit(), work)
            record(step, "torch profiler")
            if not step.ok:
                return fail(step, "torch profiler")
        report = out / "reports" / s.name
        profiled = run_step(ncu_profile_command(ncu, python, program, report, s), limit(), work)
        record(profiled, "ncu profile")
        # ncu can exit 0 after an ==ERROR== (e.g. ERR_NVGPUCTRPERM: no permission to read counters)
        if not profiled.ok or "==ERROR==" in profiled.stdout + profiled.stderr:
            return fail(profiled, "ncu profile")
        step = run_step(ncu_import_command(ncu, report.with_suffix(".ncu-rep")), limit(), work)
        record(step, "ncu import")
        if not step.ok:
            return fail(step, "ncu import", earlier=profiled)
        (out / f"{s.name}.csv").write_text(step.stdout)
        try:
            summary = summarize_csv(step.stdout)
        except ValueError as exc:
            result.status, result.error = "unreadable csv", str(exc)
            print(f"\n[{s.name}] {exc}\n--- ncu profile output ---\n{profiled.stdout}\n{profiled.stderr}",
                  file=sys.stderr, flush=True)  # fmt: skip
            return result
        result.status = "ok"
        result.kernels, result.launches = int(summary["kernels"]), int(summary["launches"])  # type: ignore[arg-type]
        result.hot_kernel, result.hot_ms = str(summary["hot_kernel"]), float(summary["hot_ms"])  # type: ignore[arg-type]
        return result
    finally:
        result.seconds = time.monotonic() - t0
        (out / f"{s.name}.log").write_text("\n".join(log) + "\n")


def environment(ncu: str, python: str) -> dict[str, str]:
    env = {"host": platform.node(), "python": platform.python_version(), "platform": platform.platform()}
    probes = {
        "ncu": [ncu, "--version"],
        "gpu": ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        "torch": [python, "-c", "import torch; print(torch.__version__, torch.version.cuda, "
                                "torch.cuda.is_available())"],
        "triton": [python, "-c", "import triton; print(triton.__version__)"],
    }
    for key, cmd in probes.items():
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            env[key] = (done.stdout.strip().splitlines() or [done.stderr.strip()])[-1]
        except (OSError, subprocess.TimeoutExpired) as exc:
            env[key] = f"unavailable: {exc}"
    return env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--out", type=Path, help="output directory (created); required unless --list")
    p.add_argument("--only", nargs="+", choices=[s.name for s in SCENARIOS], help="run only these scenarios")
    p.add_argument("--ncu", default="ncu", help="ncu executable (default: ncu on PATH)")
    p.add_argument("--python", default=sys.executable, help="python that runs the scenarios (default: this one)")
    p.add_argument("--timeout-s", type=float, default=120.0, help="time limit per step (default 120)")
    p.add_argument("--budget-s", type=float, default=270.0, help="time budget for the whole run (default 270)")
    p.add_argument("--profile-all", action="store_true", help="record PyTorch-profiler run features for every scenario")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = p.parse_args(argv)
    if args.out is None and not args.list:
        p.error("--out is required")
    return args


def print_table(outcomes: list[Outcome]) -> None:
    print(f"\n{'scenario':<24} {'kernels':>7} {'launches':>8} {'hot ms':>9} {'wall s':>7}  status")
    for o in outcomes:
        ms = f"{o.hot_ms:.4f}" if o.hot_ms is not None else "-"
        print(f"{o.name:<24} {o.kernels:>7} {o.launches:>8} {ms:>9} {o.seconds:>7.1f}  {o.status}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for s in SCENARIOS:
            print(f"{s.name:<24} {s.description}  -> expected {' or '.join(s.expected_bottlenecks)}")
        return 0
    ncu = shutil.which(args.ncu) or (args.ncu if Path(args.ncu).is_file() else None)
    if ncu is None:
        print(f"error: ncu not found ({args.ncu!r}); put Nsight Compute on PATH or pass --ncu", file=sys.stderr)
        return 2
    out: Path = args.out
    (out / "reports").mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    env = environment(ncu, args.python)
    print("environment: " + json.dumps(env), flush=True)
    outcomes: list[Outcome] = []
    chosen = [s for s in SCENARIOS if not args.only or s.name in args.only]
    with tempfile.TemporaryDirectory(prefix="capture_ncu_") as tmp:
        for s in chosen:
            remaining = deadline - time.monotonic()
            if remaining < 20:
                outcomes.append(Outcome(s.name, status=f"skipped (budget of {args.budget_s:.0f}s used)"))
                continue
            print(f"[{s.name}] {s.description} ...", flush=True)
            o = capture_scenario(s, out, Path(tmp), ncu, args.python, args.timeout_s, deadline, args.profile_all)
            print(f"[{s.name}] {o.status} in {o.seconds:.1f}s", flush=True)
            outcomes.append(o)
    manifest = {
        "environment": env,
        "scenarios": [
            {**asdict(o), "description": s.description, "expected_bottlenecks": list(s.expected_bottlenecks),
             "must_allow": list(s.must_allow), "must_not_allow": list(s.must_not_allow),
             "launch_skip": s.launch_skip, "launch_count": s.launch_count}
            for s, o in zip(chosen, outcomes, strict=True)
        ],
    }  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print_table(outcomes)
    print(f"\nwrote {out}/<scenario>.csv|.py|.log, reports/*.ncu-rep, manifest.json")
    return 0 if outcomes and all(o.status == "ok" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
