"""What a task's run comes to, in the words the loop, the benchmark, the store and the report share.

    RoundRecord    one line of a task's history: a seed or a round, what it tried, its verdict, what it promoted
    verdict()      a kernel's verdict in one word: "correct", else the review's error kind
    TaskOutcome    what a task came to: its best kernel, the speedup, the effort (calls, tokens, cost, seconds)
    summarize()    the one place a finished task's outcome is worked out, from the loop's state and the store

The loop appends RoundRecords as it goes (they are in every state snapshot the store keeps); at the end `summarize`
turns the task into a TaskOutcome, which `optimize` extends into its summary (loop/optimize.py OptimizeSummary) and
`bench` into results.json's TaskResult (report/results.py); the report reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, Field, computed_field

from kernelskill.store.rows import Branch

if TYPE_CHECKING:
    from kernelskill.store.runstore import RunStore

Promotion = Literal["best", "base", "best+base"]
NO_CANDIDATE = "no_candidate"  # the verdict of a round whose agents produced no usable kernel
# When no seed is correct, the failure to repair first: the one that got furthest (it compiled and ran)
REPAIR_ORDER = {"mismatch": 0, "runtime_error": 1, "rejected": 2, "timeout": 3, "crash": 4}


def verdict(correct: bool, error_kind: str | None) -> str:
    """A reviewed kernel's verdict: "correct", else the review's error kind ("mismatch", "compile_error" ...)."""
    return "correct" if correct else (error_kind or "failed")


def repair_rank(verdict_: str | None) -> int:
    """Lower first: how promising a failed seed is to repair (REPAIR_ORDER; anything else last)."""
    return REPAIR_ORDER.get(verdict_ or "", len(REPAIR_ORDER))


class RoundRecord(BaseModel):
    """One line of the run's history, as the live display, the summary and the report show it."""

    round: int  # 0 for seeds
    slot: int = 0  # the seed number, for seeds
    branch: Branch
    label: str | None = None  # the candidate it produced; None when the agents produced none
    method: str | None = None
    verdict: str  # verdict(), or NO_CANDIDATE (the agents' reply could not be used)
    speedup: float | None = None  # the task's eager time over `ms` (see LoopState.speedup_of)
    ms: float | None = None  # the kernel's own time, when correct
    best_speedup: float | None = None  # after this round
    promoted: Promotion | None = None
    reason: str = ""  # why the kernel failed, in one line (review/render.py failure_reason); "" when it did not
    note: str = ""


def restated(history: Sequence[RoundRecord], eager_ms: float | None) -> list[RoundRecord]:
    """The history with its speedups recomputed against the task's final eager time, so a summary is consistent
    with itself (the live display showed each figure against the eager time known at that moment)."""
    if eager_ms is None:
        return list(history)
    out, best_ms = [], None
    for rec in history:
        update: dict = {}
        if rec.ms is not None:
            update["speedup"] = eager_ms / rec.ms
            best_ms = rec.ms if best_ms is None else min(best_ms, rec.ms)
        update["best_speedup"] = None if best_ms is None else eager_ms / best_ms
        out.append(rec.model_copy(update=update))
    return out


def compare_ms(mean_ms: float | None, trimmed_ms: float | None) -> float | None:
    """The time two correct kernels are compared on, to pick the best: the trimmed mean of the review's samples
    where it has one, else their mean. The trimmed mean, because a few samples disturbed by the machine (a clock
    step, another process) move a mean enough to swap two kernels within noise; the mean stays the figure reported
    (the paper's), of the kernel this picks. The loop's promotion (KernelRef.compare_ms) and the summary's
    full-precision best both go through here."""
    return trimmed_ms if trimmed_ms is not None else mean_ms


def full_precision_best(store: RunStore, task_id: int) -> tuple[float | None, bool]:
    """The mean time of the task's best correct kernel that is not flagged reduced_precision (picked on compare_ms;
    None: there is none), and whether any of its reviews recorded a precision at all (runs before it did not)."""
    best: tuple[float, float] | None = None  # (compare time, mean time)
    recorded = False
    for c in store.candidates(task_id):
        r = store.review_of(c.id)
        if r is None:
            continue
        recorded = recorded or r.result.get("precision") is not None
        if not r.correct or r.candidate_ms is None or "reduced_precision" in (r.flags or []):
            continue
        trimmed = (((r.result.get("timing") or {}).get("candidate") or {}).get("trimmed_mean_ms"))
        key = compare_ms(r.candidate_ms, trimmed)
        if key is not None and (best is None or key < best[0]):
            best = (key, r.candidate_ms)
    return (best[1] if best else None), recorded


def rounds_to_best_of(history: Sequence[RoundRecord]) -> int | None:
    """The round whose kernel ended as the best: the last history line promoted to best. None without one."""
    rounds = [rec.round for rec in history if (rec.promoted or "").startswith("best")]
    return rounds[-1] if rounds else None


def known_cost(llm: Mapping) -> float | None:
    """What the task's calls cost (RunStore.llm_totals): None when no call had a known price, never a guess of 0."""
    return llm["cost_usd"] if llm["calls"] > llm["unpriced_calls"] else None


class TaskOutcome(BaseModel):
    """What one task came to. `summarize` builds it; OptimizeSummary and TaskResult add where and what it was."""

    success: bool  # a correct kernel was found (under the run's --rules)
    # the same under each rule set, from every review of the task (one run gives both verdicts); None: not recorded
    success_strict: bool | None = None
    success_kernelbench: bool | None = None
    # "correct" with a correct kernel; else the verdict of the task's last kernel ("mismatch", "compile_error" …),
    # "no_candidate", or None for a task that never ran (pending, or failed before its first kernel)
    verdict: str | None = None
    best_speedup: float | None  # eager time / best kernel time; None without a correct kernel
    best_ms: float | None = None
    # the best kernel's own review, which best_speedup (the task's eager time over best_ms) does not show: its median
    # and trimmed speedups, its spread (the larger relative MAD of its two sides) and, when its samples were too
    # noisy to trust, why (TimingResult.noisy_reason). None: not timed, or reviewed before these were recorded.
    best_speedup_median: float | None = None
    best_speedup_trimmed: float | None = None
    best_speedup_host_paced: float | None = None  # TimingResult.speedup_host_paced: at the launches' pace
    best_spread: float | None = None
    timing_noisy: str | None = None
    # without kernels that pass only the configured tolerance while computing in less than fp32 (reduced_precision):
    # eager time over the fastest correct kernel that is not so flagged; None when every correct kernel is, or when
    # the reviews recorded no precision (best_reduced_precision None)
    best_speedup_full_precision: float | None = None
    best_reduced_precision: bool | None = None  # the best kernel is flagged reduced_precision; None: not recorded
    reference_tf32: dict[str, bool | str] | None = None  # the TF32 switches the reference ran under (best's review)
    eager_ms: float | None = None  # the task's eager time: the median of every reference timing of its reviews
    sol_ms: float | None = None  # the problem's speed-of-light floor on its GPU (review/roofline.py), when known
    pct_of_sol: float | None = None  # that floor over the best kernel's median time, in percent
    best_label: str | None = None
    best_path: str | None = None
    flags: list[str] = Field(default_factory=list)  # the best kernel's review flags, e.g. "degenerate_reference:..."
    rounds_run: int = 0
    rounds_to_best: int | None = None  # the round (0 = seeds) whose kernel is the final best
    llm_calls: int = 0
    failed_llm_calls: int = 0
    tokens: int = 0
    cost_usd: float | None = None  # None when no call had a known price
    seconds: float | None = None
    # where the task's seconds went, summed over its reviews and profiles (RunStore.stage_totals): queue (waiting for
    # a device), prebuild, load, compile, verify, time, profile, and review_wall (whole reviews, start-up included)
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    history: list[RoundRecord] = Field(default_factory=list)
    reason: str | None = None  # why the task stopped early (budget spent, model unavailable) or failed

    @computed_field  # type: ignore[prop-decorator]
    @property
    def speedup_caveats(self) -> list[str]:
        """What a reader of best_speedup must know beside it, in short words: its timing was too noisy to trust, it
        passes only the loose tolerance in reduced precision, a host-side pace or a degenerate reference shaped it.
        The console, --json, results.json and the report all show these next to the figure."""
        if self.best_speedup is None:
            return []
        out = [f"noisy timing ({self.timing_noisy})"] if self.timing_noisy else []
        if self.best_reduced_precision:
            out.append("reduced precision (passes only the configured tolerance)")
        for flag in self.flags:
            name = flag.split(":", 1)[0]
            if name == "noisy_timing" and self.timing_noisy:
                continue
            if name in _CAVEAT_FLAGS or name.startswith(("degenerate_reference", "speedup_over_")):
                text = name if name != "degenerate_reference" else flag
                if text not in out:
                    out.append(text)
        return out


# review flags that qualify the speedup figure itself (the rest are in `flags`)
# (timing_unresolved: the judge's batch could not test the runner's claimed time; the figure rests on its events)
_CAVEAT_FLAGS = frozenset({"noisy_timing", "host_bound", "host_synchronized", "reference_host_bound", "spin_outrun",
                           "timing_unresolved"})


class _Kernel(Protocol):
    candidate_id: int
    label: str
    ms: float | None


class LoopResult(Protocol):
    """What `summarize` reads of the loop's final state (kernelskill.loop.state.LoopState)."""

    round: int
    ended: str | None
    best: _Kernel | None
    history: list[RoundRecord]

    def reference_ms(self) -> float | None: ...

    def speedup_of(self, kernel) -> float | None: ...


def summarize(store: RunStore, task_id: int, state: LoopResult, *, best_path: str | None = None,
              seconds: float | None = None) -> TaskOutcome:
    """The task's outcome: its best kernel and speedup from the loop's state (the history restated against the final
    eager time), the effort and the verdicts under both rule sets from what the store recorded."""
    eager_ms = state.reference_ms()
    history = restated(state.history, eager_ms)
    best = state.best
    review = store.review_of(best.candidate_id) if best is not None else None
    strict, kernelbench = store.success_by_rules(task_id)
    llm = store.llm_totals(task_id)
    sol = (review.result.get("speed_of_light") or {}) if review is not None else {}
    full_ms, precision_recorded = full_precision_best(store, task_id)
    reduced = ("reduced_precision" in review.flags) if review is not None and precision_recorded else None
    best_speedup = state.speedup_of(best)
    full_speedup = (best_speedup if reduced is False else
                    eager_ms / full_ms if reduced and full_ms and eager_ms else None)
    timing = (review.result.get("timing") if review else None) or {}
    return TaskOutcome(
        success=best is not None, success_strict=strict, success_kernelbench=kernelbench,
        verdict="correct" if best is not None else (history[-1].verdict if history else None),
        best_speedup=best_speedup, best_ms=best.ms if best else None, eager_ms=eager_ms,
        best_speedup_full_precision=full_speedup, best_reduced_precision=reduced,
        reference_tf32=((review.result.get("precision") or {}).get("reference_tf32") or None) if review else None,
        best_speedup_median=timing.get("speedup_median"), best_speedup_trimmed=timing.get("speedup_trimmed"),
        best_speedup_host_paced=timing.get("speedup_host_paced"), best_spread=timing.get("spread"), timing_noisy=timing.get("noisy_reason") if timing.get("noisy") else None,
        best_label=best.label if best else None, best_path=best_path, flags=list(review.flags) if review else [],
        rounds_run=state.round, rounds_to_best=rounds_to_best_of(history), llm_calls=llm["calls"],
        failed_llm_calls=llm["failed_calls"], tokens=llm["tokens"], cost_usd=known_cost(llm), seconds=seconds,
        stage_seconds=store.stage_totals(task_id), history=history, reason=state.ended,
        sol_ms=sol.get("sol_ms"), pct_of_sol=sol.get("pct_of_sol"),
    )
