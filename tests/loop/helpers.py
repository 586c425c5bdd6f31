"""Scripted agents and a scripted evaluator, so the loop's logic is tested fast and exactly.

A candidate written by these helpers carries its verdict in a comment (`# verdict: correct 1.5`); the fake evaluator
reads it back. The real Reviewer is exercised end to end in test_optimize_server.py.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from kernelskill.llm.base import Completion, LLMError, Message, Usage
from kernelskill.loop.evaluator import LocalEvaluator
from kernelskill.review.results import CompileResult, Precision, ReviewResult, TimingResult, TimingStats

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROBLEM = EXAMPLES / "gelu_chain.py"


def kernel(verdict: str, speedup: float | None = None, note: str = "", robust: float | None = None,
           reduced: bool = False) -> str:
    """A reply holding a whole candidate (the example's fused Triton kernel, so the decision policy sees a real
    kernel) whose review the fake reviewer decides from its verdict comment; `robust`: the speedup on trimmed means,
    where a few disturbed samples moved the mean; `reduced`: correct only within the loose tolerance, in fp16."""
    marker = (f"# verdict: {verdict}" + (f" {speedup}" if speedup is not None else "")
              + (f" robust {robust}" if robust is not None else "") + (" reduced" if reduced else ""))
    source = (EXAMPLES / "gelu_chain_triton.py").read_text()
    return f"Here is the kernel ({note or verdict}).\n\n```python\n{marker}\n{source}```\n"


def plan(method: str, **extra) -> str:
    body = {"bottleneck": "launch overhead", "method": method, "plan": ["fuse the two kernels", "one pass"],
            "evidence": "two launches per forward", "expected_metric_change": "fewer launches", **extra}
    return f"```json\n{json.dumps(body)}\n```"


def diagnosis(issue: str = "wrong constant") -> str:
    body = {"critical_issue": issue, "root_cause": "typo", "evidence": "max abs error 0.5", "fix": "use 0.5"}
    return f"```json\n{json.dumps(body)}\n```"


def features() -> str:
    answers = {"uncoalesced_pattern": False, "divergent_branches": False, "redundant_work": False}
    return f"```json\n{json.dumps({'features': answers})}\n```"


class AgentScript:
    """An LLM client serving each agent its own scripted replies (an exception in a list is raised instead).
    Every request is kept, with the agent that sent it."""

    priced = False
    model = "script:"

    def __init__(self, **replies: list) -> None:
        self.replies = {agent: list(items) for agent, items in replies.items()}
        self.calls: list[tuple[str, list[Message]]] = []
        self._lock = threading.Lock()

    def complete(self, messages, *, max_tokens=4096, temperature=None, agent=None) -> Completion:
        with self._lock:
            self.calls.append((agent, list(messages)))
            queue = self.replies.get(agent)
            if not queue:
                raise AssertionError(f"unscripted call from the {agent}")
            reply = queue.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return Completion(text=reply, usage=Usage(input_tokens=100, output_tokens=50), model=self.model,
                          latency_s=0.0)

    def prompts(self, agent: str) -> list[str]:
        """The user prompts sent by `agent`, in order."""
        return [m[-1].content for a, m in self.calls if a == agent]

    def unused(self) -> dict[str, int]:
        return {agent: len(q) for agent, q in self.replies.items() if q}


_VERDICT = re.compile(r"# verdict: (\w+)(?: ([\d.]+))?(?: robust ([\d.]+))?( reduced)?")


def _timing(mean_speedup: float, robust_speedup: float) -> TimingResult:
    """A timing whose candidate mean gives `mean_speedup` and whose trimmed mean gives `robust_speedup` over a
    reference of 1 ms (the candidate's mean moved by a few disturbed samples)."""
    def stats(mean: float, trimmed: float) -> TimingStats:
        return TimingStats(samples_ms=[trimmed], mean_ms=mean, median_ms=trimmed, std_ms=0.0, min_ms=trimmed,
                           max_ms=mean, trimmed_mean_ms=trimmed)

    return TimingResult(clock="cpu_perf_counter", method="scripted", warmup=1, iters=20, reference=stats(1.0, 1.0),
                        candidate=stats(1.0 / mean_speedup, 1.0 / robust_speedup), speedup=mean_speedup,
                        speedup_median=robust_speedup, speedup_trimmed=robust_speedup)


class FakeEvaluator(LocalEvaluator):
    """This machine's evaluator, with each review decided from the candidate's verdict comment; records what it
    reviewed. `profiler` and `prebuilder` replace the profile and the build ahead."""

    def __init__(self, device: str = "cpu", *, profiler=None, prebuilder=None) -> None:
        super().__init__(device, reviewer=self._review_by_comment, profiler=profiler, prebuilder=prebuilder)
        self.reviewed: list[str] = []

    def _review_by_comment(self, problem, candidate, settings, log_dir=None, env=None) -> ReviewResult:
        m = _VERDICT.search(candidate.source)
        assert m, "candidate without a verdict comment"
        verdict, speedup = m.group(1), float(m.group(2)) if m.group(2) else None
        self.reviewed.append(verdict)
        base = dict(device="cpu", backend="triton", problem=str(problem), candidate=candidate.filename)
        if verdict == "correct":
            timing = _timing(speedup, float(m.group(3))) if m.group(3) else None
            reduced = bool(m.group(4))  # passes only the loose tolerance, in fp16 (precision recorded either way)
            precision = Precision(output_dtypes=["float32"], compute_dtypes=["float16"] if reduced else [],
                                  strict_tolerance_ok=not reduced, reduced_precision=reduced)
            return ReviewResult(**base, compiled=True, correct=True, stage=None, error=None, speedup=speedup,
                                ref_ms=1.0, candidate_ms=1.0 / speedup, timing=timing, precision=precision,
                                flags=["reduced_precision"] if reduced else [])
        if verdict == "compile_error":
            return ReviewResult(**base, compiled=False, correct=False, stage="compile", error_kind="compile_error",
                                error="kernel.py:3: error: expected ';'",
                                compile=CompileResult(ok=False, backend="triton", errors="expected ';'"))
        return ReviewResult(**base, compiled=True, correct=False, stage="verify", error_kind=verdict,
                            error=f"{verdict}: max abs error 0.5 at [0, 3]", max_abs_error=0.5)


class Unavailable(LLMError):
    pass
