"""The benchmark's figures over a set of tasks: the paper's Success, Speedup and Fast_1, and the rest.

Conventions, fixed here once so that every table, plot and JSON file agrees:

- A task *has a correct kernel* when `success` is true, its status is ended ('finished' or 'failed'; a pending or
  running task counts as without one) and it has a `best_speedup`.
- Shares (success, fast_1, fast_p) are over ALL tasks given, as KernelBench defines fast_p.
- Speedup, geomean, median and rounds_to_best are over the tasks with a correct kernel (the paper's Speedup column);
  `speedup_mean_all` is over all tasks, a task without a correct kernel counting 1.0 (it falls back to PyTorch).
- Against torch.compile (`CompileMetrics`) the denominator is the tasks that have a compile baseline: a task whose
  baseline could not be taken says nothing about torch.compile either way.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:  # results.py imports this module: the type is only needed for annotations
    from kernelskill.report.results import TaskResult

FAST_P = ("0.5", "0.8", "1.5", "2")  # the thresholds of `fast_p`; 1 has its own field, the paper's Fast_1
_ENDED = ("finished", "failed")


class CompileMetrics(BaseModel):
    """The figures against torch.compile(Model) instead of eager, for the tasks that have a compile baseline.

    Whether a correct kernel was found does not depend on the baseline, so there is no success share here: read it
    from `Metrics.success`.
    """

    tasks_with_baseline: int  # tasks with a compile_ms: the denominator of fast_1 and fast_p below
    tasks_compared: int  # of those, the tasks with a correct kernel and a speedup_vs_compile
    speedup_mean: float | None  # mean speedup_vs_compile over the tasks compared
    speedup_geomean: float | None
    speedup_median: float | None
    fast_1: float  # share of tasks_with_baseline whose correct kernel is at least as fast as torch.compile
    fast_p: dict[str, float]  # keys FAST_P: share of tasks_with_baseline at speedup_vs_compile >= p
    compile_vs_eager_mean: float | None  # mean eager_ms / compile_ms: how much torch.compile alone gains
    compile_vs_eager_geomean: float | None


class Metrics(BaseModel):
    """The figures of one set of tasks (a level, or the whole run). See the module docstring for the conventions."""

    tasks: int
    solved: int  # tasks with a correct kernel
    success: float  # solved / tasks (0..1)
    # success under each rule set (tasks that record both verdicts; None when none does)
    success_strict: float | None = None
    success_kernelbench: float | None = None
    speedup_mean: float | None  # mean best_speedup over the tasks with a correct kernel: the paper's Speedup
    speedup_mean_all: float  # mean over all tasks, a task without a correct kernel counting 1.0
    speedup_geomean: float | None
    speedup_median: float | None
    fast_1: float  # share of ALL tasks with a correct kernel at speedup >= 1: the paper's Fast_1
    fast_p: dict[str, float]  # keys FAST_P: share of ALL tasks with a correct kernel at speedup >= p
    vs_compile: CompileMetrics | None  # None when no task has a compile baseline
    tokens: int
    cost_usd: float | None  # the sum of the known costs; None when no task has a known cost
    rounds_to_best: float | None  # mean over the tasks with a correct kernel that record it
    noisy: int = 0  # tasks with a correct kernel whose best kernel's timing was too noisy to trust (timing_noisy)
    # the same without reduced-precision results (fp32 problems solved in TF32/fp16 that pass only the configured
    # tolerance): tasks whose best kernel is so flagged, and success and Speedup with each task's fastest correct
    # kernel that is not; None when no task recorded precision
    reduced_precision: int = 0
    success_full_precision: float | None = None
    speedup_mean_full_precision: float | None = None


def has_correct_kernel(task: TaskResult) -> bool:
    return task.success and task.status in _ENDED and task.best_speedup is not None


def compute_metrics(tasks: Sequence[TaskResult]) -> Metrics:
    """The figures of `tasks`. With no tasks every share is 0, every mean None and speedup_mean_all 1.0."""
    n = len(tasks)
    solved = [t for t in tasks if has_correct_kernel(t)]
    speedups = [t.best_speedup for t in solved]
    costs = [t.cost_usd for t in tasks if t.cost_usd is not None]
    to_best = [t.rounds_to_best for t in solved if t.rounds_to_best is not None]
    return Metrics(
        tasks=n,
        solved=len(solved),
        success=_share(len(solved), n),
        success_strict=_rule_share(tasks, "success_strict"),
        success_kernelbench=_rule_share(tasks, "success_kernelbench"),
        speedup_mean_all=(sum(speedups) + (n - len(solved)) * 1.0) / n if n else 1.0,
        **_speedup_figures(speedups, n),
        vs_compile=_compile_metrics(tasks),
        tokens=sum(t.tokens for t in tasks),
        cost_usd=sum(costs) if costs else None,
        rounds_to_best=_mean(to_best),
        noisy=sum(t.timing_noisy is not None for t in solved),
        **_full_precision(tasks, solved),
    )


def _full_precision(tasks: Sequence[TaskResult], solved: Sequence[TaskResult]) -> dict:
    if not any(t.best_reduced_precision is not None for t in solved):
        return {}
    full = [t.best_speedup_full_precision for t in solved if t.best_speedup_full_precision is not None]
    return dict(reduced_precision=sum(bool(t.best_reduced_precision) for t in solved),
                success_full_precision=_share(len(full), len(tasks)), speedup_mean_full_precision=_mean(full))


def _compile_metrics(tasks: Sequence[TaskResult]) -> CompileMetrics | None:
    with_baseline = [t for t in tasks if t.compile_ms is not None]
    if not with_baseline:
        return None
    n = len(with_baseline)
    speedups = [t.speedup_vs_compile for t in with_baseline
                if has_correct_kernel(t) and t.speedup_vs_compile is not None]
    gains = [t.eager_ms / t.compile_ms for t in with_baseline if t.eager_ms is not None and t.compile_ms > 0]
    return CompileMetrics(
        tasks_with_baseline=n,
        tasks_compared=len(speedups),
        **_speedup_figures(speedups, n),
        compile_vs_eager_mean=_mean(gains),
        compile_vs_eager_geomean=_geomean(gains),
    )


def _speedup_figures(speedups: Sequence[float], n: int) -> dict:
    """Mean, geomean and median of `speedups`; fast_1 and fast_p as shares of `n` tasks."""
    return dict(
        speedup_mean=_mean(speedups),
        speedup_geomean=_geomean(speedups),
        speedup_median=statistics.median(speedups) if speedups else None,
        fast_1=_share(sum(s >= 1.0 for s in speedups), n),
        fast_p={p: _share(sum(s >= float(p) for s in speedups), n) for p in FAST_P},
    )


def _rule_share(tasks: Sequence[TaskResult], field: str) -> float | None:
    values = [getattr(t, field) for t in tasks if getattr(t, field) is not None]
    return _share(sum(values), len(tasks)) if values else None


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _geomean(values: Iterable[float]) -> float | None:
    """exp of the mean log. A speedup of 0 or less cannot occur (it is a ratio of times): such a value is a bug
    upstream, and math.log says so rather than the geomean quietly skipping it."""
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else None
