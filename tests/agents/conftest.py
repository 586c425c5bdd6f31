"""Fixtures for the agents' tests: contexts built from the real example problem, candidate and knowledge base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelskill.agents import (
    Attempt,
    DecisionBrief,
    Diagnosis,
    OptimizeContext,
    Plan,
    PlanContext,
    RepairContext,
    RepairStep,
    ReviewFeedback,
    TaskBrief,
)
from kernelskill.memory import load_knowledge

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROBLEM = (EXAMPLES / "gelu_chain.py").read_text()
CANDIDATE = (EXAMPLES / "gelu_chain_triton.py").read_text()

DIAGNOSIS_JSON = """```json
{"critical_issue": "syntax error", "root_cause": "missing colon on line 9", "evidence": "SyntaxError: expected ':'",
 "fix": ["add the colon"]}
```"""


def code_reply(source: str = CANDIDATE) -> str:
    return f"Here is the kernel.\n```python\n{source}```\n"


def plan_reply(method: str, **extra: object) -> str:
    data = {"bottleneck": "memory bound: dram 85%", "method": method, "plan": ["merge the two kernels"],
            "evidence": ["dram_throughput_pct = 85"], "expected_metric_change": {"kernel_time_ns": "down"},
            "confidence": 0.7, **extra}  # fmt: skip
    return f"I will fuse the launches.\n```json\n{json.dumps(data, indent=1)}\n```"


@pytest.fixture(scope="session")
def kb():
    return load_knowledge()


def task(backend: str = "triton", device: str = "cuda") -> TaskBrief:
    return TaskBrief(name="gelu_chain", source=PROBLEM, backend=backend, device=device,
                     device_name="NVIDIA H200" if device == "cuda" else None)  # fmt: skip


GOOD = ReviewFeedback(correct=True, speedup=1.8, ref_ms=0.021, candidate_ms=0.0117)
BAD = ReviewFeedback(
    correct=False, stage="compile", error_kind="compile_error", error="candidate.py:9:5: SyntaxError: expected ':'",
    log_tail="Traceback ...\nSyntaxError",
)


def decision(kb, ids: list[str]) -> DecisionBrief:
    return DecisionBrief(bottleneck="memory_bound", case="pointwise_memory_bound", tier="T2", allowed_methods=ids,
                         forbidden_methods=["tensor_cores"], evidence=["dram_throughput_pct = 85.0"],
                         caveats=["profile taken on one input size"])  # fmt: skip


def plan_context(kb, *, backend="triton", device="cuda", ltm=True, stm=True, attempts=None) -> PlanContext:
    ids = ["kernel_fusion", "vectorize_memory_access", "warp_level_reduction"]
    return PlanContext(
        task=task(backend, device), base_label="seed-1", base_source=CANDIDATE, base_feedback=GOOD,
        decision=decision(kb, ids) if ltm else None,
        methods=[kb.method(i) for i in ids] if ltm else None,
        attempts=(attempts if attempts is not None else []) if stm else None,
    )  # fmt: skip


def an_attempt(method: str = "kernel_fusion") -> Attempt:
    return Attempt(label="round-01", method=method, plan="fuse everything", outcome="not_faster", speedup=1.7,
                   base_speedup=1.8, detail="no change in DRAM traffic")  # fmt: skip


def a_plan(method: str = "vectorize_memory_access") -> Plan:
    return Plan(bottleneck="memory bound", method=method, plan=["use 16-byte accesses", "BLOCK = 4096"],
                evidence="dram 85%", expected_metric_change={"dram_throughput_pct": "up"})  # fmt: skip


def optimize_context(kb, *, backend="triton", device="cuda", method="vectorize_memory_access") -> OptimizeContext:
    return OptimizeContext(task=task(backend, device), base_label="seed-1", base_source=CANDIDATE, base_feedback=GOOD,
                           plan=a_plan(method), method=kb.method(method))  # fmt: skip


def a_diagnosis() -> Diagnosis:
    return Diagnosis(critical_issue="syntax error", root_cause="missing colon", evidence="line 9", fix="add ':'")


def repair_context(*, backend="triton", device="cuda", chain=True, goal="vectorize loads") -> RepairContext:
    steps = [
        RepairStep(label="round-02", feedback=BAD, diagnosis=None, outcome="still fails to compile: SyntaxError"),
        RepairStep(label="round-02-r1", feedback=BAD, diagnosis=a_diagnosis(), outcome="still fails"),
    ]
    return RepairContext(task=task(backend, device), failing_label="round-02-r2", failing_source=CANDIDATE,
                         feedback=BAD, chain=steps if chain else [], goal=goal)  # fmt: skip
