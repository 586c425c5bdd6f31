"""The loop's state between rounds, the promotion rule, and the short-term memory it carries (its history lines,
RoundRecord, are loop/outcome.py's).

The whole state is one pydantic object. After every round it is written to the run store as JSON, so a resumed run
starts from the last finished round exactly as if it had never stopped.
"""

from __future__ import annotations

import statistics

from pydantic import BaseModel, Field

from kernelskill.agents.context import Attempt, RepairStep, ReviewFeedback
from kernelskill.loop.outcome import RoundRecord, compare_ms


class KernelRef(BaseModel):
    """A reviewed kernel the loop keeps hold of (best, base, or the latest failure)."""

    candidate_id: int
    label: str  # e.g. "seed-2", "round-07"
    path: str  # relative to the run folder
    source: str
    speedup: float | None = None  # vs PyTorch eager; None when it failed or was not timed
    ms: float | None = None  # the review's mean time per call (the paper's figure, which the loop reports)
    robust_ms: float | None = None  # the same samples' trimmed mean (TimingStats): what kernels are compared on
    feedback: ReviewFeedback

    @property
    def compare_ms(self) -> float | None:
        """The time two kernels are compared on: the trimmed mean where the review has one, so that a few
        disturbed samples (a descheduled host, a busy build beside the timing) do not decide which kernel is best;
        on clean samples it drops nothing and equals the mean."""
        return compare_ms(self.ms, self.robust_ms)


class LoopState(BaseModel):
    round: int = 0  # the last finished round (0: the seed phase finished)
    best: KernelRef | None = None
    base: KernelRef | None = None
    # the repair chain: `failing` is the latest kernel and failed; `chain` holds the earlier links
    failing: KernelRef | None = None
    chain: list[RepairStep] = Field(default_factory=list)
    chain_method: str | None = None  # the optimization whose kernel started the chain (None: a seed started it)
    chain_goal: str | None = None  # that optimization's plan
    chain_base_speedup: float | None = None
    # the optimization memory of the current base
    attempts: list[Attempt] = Field(default_factory=list)
    llm_features: dict[str, dict] = Field(default_factory=dict)  # source sha256 -> the Feature Extractor's answers
    history: list[RoundRecord] = Field(default_factory=list)
    ref_ms: list[float] = Field(default_factory=list)  # every eager timing taken during the task
    ended: str | None = None  # why the task stopped early (budget spent, LLM unavailable …)

    def speedup_of(self, kernel: KernelRef | None) -> float | None:
        """A kernel's speedup as the loop reports and compares it: the task's eager time over the kernel's time.
        (Each review's own paired figure stays in the run store and in the feedback the agents read.)"""
        if kernel is None or kernel.ms is None:
            return None
        ref = self.reference_ms()
        return kernel.speedup if ref is None else ref / kernel.ms

    def reference_ms(self) -> float | None:
        """The task's eager time: the median of every reference timing so far."""
        return statistics.median(self.ref_ms) if self.ref_ms else None


def promotion(ms: float, best: KernelRef | None, base: KernelRef | None, ref_ms: float, rt: float,
              at: float) -> tuple[bool, bool]:
    """(becomes best, becomes base) for a correct kernel that runs in `ms`.

    `ms` and the kernels' times are KernelRef.compare_ms (trimmed means where the reviews have them).
    The published rule on speedups vs eager: best when faster than the best so far; base when it is the first
    correct kernel, or speedup / base speedup > 1 + rt, or speedup − base speedup > at (rt = at = 0.3). Speedups
    here divide one reference time, `ref_ms` (the median of every eager timing taken during the task), by each
    kernel's own time: the eager time of a small problem is the noisiest number a review takes, and comparing two
    kernels must not depend on how the reference happened to time in their two reviews.
    """
    is_best = best is None or best.compare_ms is None or ms < best.compare_ms
    if base is None or base.compare_ms is None:
        return is_best, True
    speedup, base_speedup = ref_ms / ms, ref_ms / base.compare_ms
    is_base = speedup / base_speedup > 1 + rt or speedup - base_speedup > at
    return is_best, is_base
