"""Helpers for the long-term-memory tests: evidence built from field values, the capture script as a module.

(A uniquely named module rather than conftest.py, so `from memhelpers import ...` cannot clash with other test
folders' conftest modules.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from kernelskill.memory.features.extract import FeatureValue
from kernelskill.memory.policy.evidence import Evidence
from kernelskill.profiling.summary import ProfilerKernel, ProfilerSummary
from kernelskill.memory.features.extract import unknown_features
from kernelskill.memory.knowledge import KnowledgeBase
from kernelskill.profiling.ncu import KernelRecord, MetricValue, NcuReport
from kernelskill.review.work import ProblemWork

REPO = Path(__file__).resolve().parents[2]
NCU_DATA = REPO / "tests" / "data" / "ncu"

# A kernel that is busy nowhere: memory-side, far from every ceiling, healthy occupancy, coalesced.
# With BASE_CODE it decides memory_latency / ml_generic; each decision-table entry overrides what it needs.
BASE_FIELDS: dict[str, float] = {
    "kernel_time_ns": 100_000, "sm_throughput_pct": 30, "memory_throughput_pct": 30, "dram_throughput_pct": 25,
    "l1tex_throughput_pct": 30, "l2_throughput_pct": 25, "l1_hit_rate_pct": 10, "l2_hit_rate_pct": 50,
    "dram_bytes_read": 1e7, "dram_bytes_write": 1e7, "achieved_occupancy_pct": 60, "theoretical_occupancy_pct": 100,
    "registers_per_thread": 32, "block_size": 256, "grid_size": 10_000, "waves_per_sm": 9.5, "sm_count": 132,
    "static_smem_per_block": 0, "dynamic_smem_per_block": 0, "occupancy_limit_registers": 8,
    "occupancy_limit_shared_mem": 32, "occupancy_limit_warps": 8, "occupancy_limit_blocks": 32,
    "global_ld_sectors": 4e6, "global_ld_requests": 1e6, "global_st_sectors": 4e6, "global_st_requests": 1e6,
    "global_ld_bytes_requested": 1.28e8, "global_st_bytes_requested": 1.28e8, "local_ld_sectors": 0,
    "local_st_sectors": 0, "smem_bank_conflicts_ld": 0, "smem_wavefronts_ld": 0, "ffma_thread_inst": 1e6,
    "fadd_thread_inst": 0, "fmul_thread_inst": 0, "fma_pipe_pct": 10, "alu_pipe_pct": 5, "xu_pipe_pct": 0,
    "lsu_pipe_pct": 10, "tensor_pipe_pct": 0, "issue_active_pct": 30, "active_threads_per_warp": 32,
    "branch_uniformity_pct": 100, "warp_cycles_per_issue": 40, "stall_long_scoreboard": 20, "stall_barrier": 0,
    "stall_mio_throttle": 0.3, "stall_lg_throttle": 1, "stall_math_pipe_throttle": 0.1, "stall_short_scoreboard": 0.2,
}  # fmt: skip

BASE_CODE: dict[str, Any] = {"backend": "triton", "kernel_count": 1, "launch_sites_per_forward": 1,
                             "cuda_graph_eligible": True}  # fmt: skip


def report_from_fields(kb: KnowledgeBase, fields: dict[str, float], kernel: str = "candidate_kernel",
                       launches: int = 1) -> NcuReport:  # fmt: skip
    """An ncu report whose hottest kernel carries `fields` under each field's first raw metric name."""
    specs = {f.id: f for f in kb.field_mapping}
    metrics = {specs[k].sources[0]: MetricValue(value=float(v), unit=(specs[k].units or [""])[0])
               for k, v in fields.items()}  # fmt: skip
    time_ns = fields.get("kernel_time_ns", 1000.0)
    record = KernelRecord(name=kernel, launches=launches, time_ns=time_ns, time_share=1.0, metrics=metrics)
    return NcuReport(source="<test>", kernels=[record])


def code_features(kb: KnowledgeBase, values: dict[str, Any] | None) -> dict[str, FeatureValue]:
    """Rule features from `values` (missing ones false / 0), llm features unknown; None: no code at all."""
    if values is None:
        return unknown_features(kb.code_features, "no candidate source given (--code)")
    out = {}
    for spec in kb.code_features:
        if spec.mode == "llm" and spec.id not in values:
            out[spec.id] = FeatureValue(value=None, mode="llm", status="unknown", reason="no LLM")
            continue
        default = 0 if spec.type == "int" else (spec.values or [None])[0] if spec.type == "enum" else False
        out[spec.id] = FeatureValue(value=values.get(spec.id, default), mode=spec.mode, status="ok")
    return out


def make_evidence(
    kb: KnowledgeBase,
    fields: dict[str, float] | None = None,
    code: dict[str, Any] | None = None,
    profiler: dict[str, float] | None = None,
    kernel: str = "candidate_kernel",
    base: bool = True,
    problem: dict[str, Any] | None = None,
) -> Evidence:
    """Evidence from field overrides (on BASE_FIELDS unless base=False), code-feature overrides (on BASE_CODE), an
    optional profiler summary {launches, kernel_us, forward_us} per forward and an optional problem's work
    {flops, bytes, output_bytes, precision, gpu} (review/work.py's ProblemWork)."""
    ev = Evidence(code_features=code_features(kb, None if code is None else {**BASE_CODE, **code}))
    if problem is not None:
        ev.problem = ProblemWork(source="test", **problem)
    if fields is not None:
        ev.ncu = report_from_fields(kb, {**(BASE_FIELDS if base else {}), **fields}, kernel=kernel)
        ev.ncu_status = "ok"
    if profiler is not None:
        n = int(profiler["launches"])
        ev.profiler = ProfilerSummary(
            forwards=1, forward_time_us=profiler.get("forward_us"),
            kernels=[ProfilerKernel(name=f"k{i}", count=1, total_time_us=profiler["kernel_us"]) for i in range(n)],
        )  # fmt: skip
    return ev


def load_capture_script():
    """scripts/capture_ncu.py as a module (it is a script, not part of the package)."""
    if "capture_ncu" in sys.modules:
        return sys.modules["capture_ncu"]
    spec = importlib.util.spec_from_file_location("capture_ncu", REPO / "scripts" / "capture_ncu.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["capture_ncu"] = module
    spec.loader.exec_module(module)
    return module
