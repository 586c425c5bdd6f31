"""What the decision policy is given: ncu metrics, PyTorch-profiler run data and code features.

Each part may be absent (ncu not installed or not permitted, no profiler run, no candidate source). The Evidence
says which parts exist and why the others do not; the policy reports whatever it could not use as unknown.

Run features are computed here, one function per (feature, source). The knowledge base lists each feature's sources
in order of preference, so the curator decides, e.g., that launch counts come from the profiler (per forward) while
the hottest kernel comes from ncu (the kernel whose metrics drive the decision).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from kernelskill.memory.features.extract import FeatureValue
from kernelskill.profiling.ncu import NcuReport
from kernelskill.profiling.summary import NcuStatus, ProfilerKernel, ProfilerSummary
from kernelskill.review.work import ProblemWork


class TriedMethod(BaseModel):
    """A method already tried on the kernel being advised on, and how it went (the loop's optimization memory)."""

    method: str
    outcome: str  # promoted | improved | not_faster | failed
    speedup: float | None = None  # the tried kernel's speedup over eager, when it was correct


class Evidence(BaseModel):
    ncu: NcuReport | None = None
    ncu_status: NcuStatus = "not_provided"
    ncu_note: str | None = None  # e.g. ncu's error output when it failed
    profiler: ProfilerSummary | None = None
    profiler_note: str | None = None  # why there is no profiler summary, when one was attempted
    problem: ProblemWork | None = None
    code_path: str | None = None
    code_features: dict[str, FeatureValue] = {}
    collection: list[str] = []  # how the evidence was gathered (profiling commands, their outcome and time)
    tried: list[TriedMethod] = []  # methods already tried on this kernel (the advice marks them, never hides them)


# ---- run features: (evidence, kernel-name patterns) -> value, or None when this source cannot give it ----------------

Getter = Callable[[Evidence, dict[str, list[str]]], Any]


def _prof(ev: Evidence) -> ProfilerSummary | None:
    return ev.profiler if ev.profiler is not None and ev.profiler.kernels else None


def _ncu(ev: Evidence) -> NcuReport | None:
    return ev.ncu if ev.ncu_status == "ok" and ev.ncu is not None and ev.ncu.kernels else None


def _named(name: str, patterns: list[str]) -> bool:
    return any(re.search(p, name, flags=re.IGNORECASE) for p in patterns)


def _prof_launches(ev: Evidence, _: object) -> float | None:
    p = _prof(ev)
    return sum(k.count for k in p.kernels) / p.forwards if p else None


def _prof_mean_us(ev: Evidence, _: object) -> float | None:
    p = _prof(ev)
    return sum(k.total_time_us for k in p.kernels) / sum(k.count for k in p.kernels) if p else None


def _ncu_mean_us(ev: Evidence, _: object) -> float | None:
    r = _ncu(ev)
    return sum(k.time_ns for k in r.kernels) / sum(k.launches for k in r.kernels) / 1e3 if r else None


def _prof_idle(ev: Evidence, _: object) -> float | None:
    p = _prof(ev)
    if p is None or p.forward_time_us is None:
        return None
    busy = sum(k.total_time_us for k in p.kernels) / p.forwards
    return min(1.0, max(0.0, 1.0 - busy / p.forward_time_us))  # overlapping kernels can exceed wall time


def _prof_hot(ev: Evidence) -> ProfilerKernel | None:
    p = _prof(ev)
    return max(p.kernels, key=lambda k: k.total_time_us) if p else None


def _prof_hot_share(ev: Evidence, _: object) -> float | None:
    p, hot = _prof(ev), _prof_hot(ev)
    total = sum(k.total_time_us for k in p.kernels) if p else 0.0
    return hot.total_time_us / total if hot and total > 0 else None


def _prof_shares(ev: Evidence, _: object) -> list[dict[str, Any]] | None:
    p = _prof(ev)
    if p is None:
        return None
    total = sum(k.total_time_us for k in p.kernels) or 1.0
    rows = sorted(p.kernels, key=lambda k: k.total_time_us, reverse=True)
    return [{"name": k.name, "launches": k.count, "time_us": k.total_time_us, "share": k.total_time_us / total}
            for k in rows]  # fmt: skip


def _ncu_shares(ev: Evidence, _: object) -> list[dict[str, Any]] | None:
    r = _ncu(ev)
    return [{"name": k.name, "launches": k.launches, "time_us": k.time_ns / 1e3, "share": k.time_share}
            for k in r.kernels] if r else None  # fmt: skip


def _gpu_name(ev: Evidence) -> str | None:
    if ev.problem is not None and ev.problem.gpu:
        return ev.problem.gpu
    r = _ncu(ev)
    if r is not None:
        name = r.hottest.metrics.get("device__attribute_display_name")
        return name.value if name is not None and isinstance(name.value, str) else None
    return None


def _sol_ms(ev: Evidence, _: object) -> float | None:
    from kernelskill.review.roofline import floor_ms

    w = ev.problem
    if w is None or w.flops is None or w.bytes is None or w.precision is None:
        return None
    return floor_ms(w.flops, w.bytes, w.precision, _gpu_name(ev))


def _peaks(ev: Evidence):  # noqa: ANN202 - a roofline.GpuPeaks or None
    from kernelskill.review.roofline import find_gpu

    return find_gpu(_gpu_name(ev))


def _floor_memory_ms(ev: Evidence, _: object) -> float | None:
    """The problem's bytes at the GPU's full DRAM bandwidth: the memory half of the floor."""
    w, peaks = ev.problem, _peaks(ev)
    if w is None or w.bytes is None or peaks is None:
        return None
    return w.bytes / (peaks.hbm_tbps * 1e12) * 1e3


def _floor_fp32_ms(ev: Evidence, _: object) -> float | None:
    """The problem's FLOPs on the FP32 FMA pipes (no tensor cores): the compute half of the floor without them."""
    w, peaks = ev.problem, _peaks(ev)
    peak = peaks.peak_flops("fp32") if peaks is not None else None
    if w is None or w.flops is None or peak is None:
        return None
    return w.flops / peak * 1e3


# Bytes per element of the data a problem of each precision computes on (tf32: FP32 data on TF32 tensor cores).
_ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def _problem_outputs(ev: Evidence, _: object) -> float | None:
    w = ev.problem
    size = _ELEMENT_BYTES.get(w.precision or "") if w is not None else None
    if w is None or w.output_bytes is None or not w.output_bytes or size is None:
        return None
    return w.output_bytes / size


def _problem_inputs_per_output(ev: Evidence, _: object) -> float | None:
    w = ev.problem
    if w is None or w.bytes is None or not w.output_bytes:
        return None
    return max(0.0, w.bytes - w.output_bytes) / w.output_bytes


def _problem_macs_per_output(ev: Evidence, _: object) -> float | None:
    """Multiply-adds per output element: a matrix product's K (2 M N K FLOPs over M N outputs), a convolution's
    C_in x kernel taps. 0 for a problem without matrix products, unknown without the problem's FLOPs or outputs."""
    w, outputs = ev.problem, _problem_outputs(ev, None)
    if w is None or w.flops is None or not outputs:
        return None
    return w.flops / 2 / outputs


def _problem_macs_per_input(ev: Evidence, _: object) -> float | None:
    """Multiply-adds per element the problem reads or writes: how often each element (a weight, above all) is used.
    A product M x K @ K x N reads about K (M + N) elements for M N K multiply-adds, so this is close to the smaller
    of M and N: the batch of a linear layer applied to a few rows. Unknown without the problem's FLOPs or bytes."""
    w = ev.problem
    size = _ELEMENT_BYTES.get(w.precision or "") if w is not None else None
    if w is None or w.flops is None or not w.bytes or size is None:
        return None
    return w.flops / 2 / (w.bytes / size)


def _problem_output_share(ev: Evidence, _: object) -> float | None:
    """The outputs' share of the problem's minimum bytes (1 when writing the output is all the traffic)."""
    w = ev.problem
    if w is None or w.output_bytes is None or not w.bytes:
        return None
    return min(1.0, w.output_bytes / w.bytes)


def _ncu_forward_ms(ev: Evidence, _: object) -> float | None:
    # One launch of each kernel: a lower bound on the forward's GPU time (each kernel runs at least once per
    # forward), so the percent of the floor computed from it is an upper bound - headroom is at least that large.
    r = _ncu(ev)
    return sum(k.time_ns / k.launches for k in r.kernels) / 1e6 if r else None


RUN_FEATURES: dict[str, dict[str, Getter]] = {
    "launches_per_forward": {"torch_profiler": _prof_launches},
    "distinct_kernels": {
        "torch_profiler": lambda ev, _: len(p.kernels) if (p := _prof(ev)) else None,
        "ncu": lambda ev, _: len(r.kernels) if (r := _ncu(ev)) else None,
    },
    "mean_kernel_time_us": {"torch_profiler": _prof_mean_us, "ncu": _ncu_mean_us},
    "gpu_idle_share": {"torch_profiler": _prof_idle},
    "hot_kernel_time_share": {
        "ncu": lambda ev, _: r.hottest.time_share if (r := _ncu(ev)) else None,
        "torch_profiler": _prof_hot_share,
    },
    "hot_kernel_time_us": {
        "ncu": lambda ev, _: r.hottest.time_ns / r.hottest.launches / 1e3 if (r := _ncu(ev)) else None,
        "torch_profiler": lambda ev, _: h.total_time_us / h.count if (h := _prof_hot(ev)) else None,
    },
    "hot_kernel_is_library": {
        "ncu": lambda ev, pats: _named(r.hottest.name, pats["library"]) if (r := _ncu(ev)) else None,
        "torch_profiler": lambda ev, pats: _named(h.name, pats["library"]) if (h := _prof_hot(ev)) else None,
    },
    "hot_kernel_is_gemm": {
        "ncu": lambda ev, pats: _named(r.hottest.name, pats["gemm"]) if (r := _ncu(ev)) else None,
        "torch_profiler": lambda ev, pats: _named(h.name, pats["gemm"]) if (h := _prof_hot(ev)) else None,
    },
    "kernel_time_shares": {"ncu": _ncu_shares, "torch_profiler": _prof_shares},
    "ncu_launches": {"ncu": lambda ev, _: sum(k.launches for k in r.kernels) if (r := _ncu(ev)) else None},
    "hot_kernel_launches": {"ncu": lambda ev, _: r.hottest.launches if (r := _ncu(ev)) else None},
    "sol_ms": {"problem": _sol_ms},
    "floor_memory_ms": {"problem": _floor_memory_ms},
    "floor_fp32_ms": {"problem": _floor_fp32_ms},
    "problem_outputs": {"problem": _problem_outputs},
    "problem_inputs_per_output": {"problem": _problem_inputs_per_output},
    "problem_macs_per_output": {"problem": _problem_macs_per_output},
    "problem_output_share": {"problem": _problem_output_share},
    "problem_macs_per_input": {"problem": _problem_macs_per_input},
    "forward_ms": {
        "problem": lambda ev, _: ev.problem.forward_ms if ev.problem is not None else None,
        "torch_profiler": lambda ev, _: p.forward_time_us / 1e3 if (p := _prof(ev)) and p.forward_time_us else None,
        "ncu": _ncu_forward_ms,
    },
}
