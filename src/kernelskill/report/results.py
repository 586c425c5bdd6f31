"""results.json: the typed outcome of a benchmark run, one `TaskResult` per problem plus the figures over them.

`kernelskill bench` writes RUN_DIR/results.json after every finished task (atomically, so a reader never sees half a
file); `kernelskill report` reads it back and renders it. Every number the report shows comes from this file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, ValidationError

from kernelskill.errors import KernelSkillError
from kernelskill.folders import write_atomically
from kernelskill.report.metrics import Metrics, compute_metrics
from kernelskill.loop.outcome import TaskOutcome
from kernelskill.store.rows import TaskStatus

RESULTS_NAME = "results.json"
SCHEMA_VERSION = 1  # raise it when a field changes meaning; adding an optional field keeps it


class TaskResult(TaskOutcome):
    """One problem of the benchmark: what the agent loop made of it (TaskOutcome), and which problem it was."""

    name: str  # problem file stem, e.g. "19_ReLU"
    level: str  # "1", "2", "3", or a folder name when the problems were one plain folder
    index: int | None  # the file's numeric prefix (19); None if it has none
    problem: str  # path of the problem file
    status: TaskStatus
    compile_ms: float | None = None  # torch.compile(Model), when the run took that baseline
    speedup_vs_compile: float | None = None  # compile_ms / best_ms
    # the same at the pace of calls made back to back from Python (TimingResult.speedup_vs_compile_host_paced): where
    # torch.compile's per-call host work, not its GPU time, sets the pace
    speedup_vs_compile_host_paced: float | None = None
    task_id: int | None = None  # the task's row in run.db, when known: how the report finds its tree


class BenchResults(BaseModel):
    """The whole of results.json."""

    schema_version: int = SCHEMA_VERSION
    generated_at: str | None = None  # ISO-8601 UTC, stamped by build_results
    run: dict  # free-form description: model, backend, seeds, rounds, ablation, baseline, gpus, started, …
    overall: Metrics
    levels: dict[str, Metrics]  # per level, keys in level_key order
    tasks: list[TaskResult]  # in task_key order


def level_key(level: str) -> tuple:
    """Natural order of level names: "1" < "2" < "10", then named folders ("conv" < "level_4" < "level_10")."""
    if level.isdigit():
        return (0, int(level), "")
    parts = re.split(r"(\d+)", level)
    return (1, 0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts))


def task_key(task: TaskResult) -> tuple:
    """(level, index, name), a task without an index after the numbered ones of its level."""
    return (level_key(task.level), task.index is None, task.index or 0, task.name)


def build_results(run: dict, tasks: Sequence[TaskResult]) -> BenchResults:
    """The results of a run: tasks sorted, figures per level and overall."""
    ordered = sorted(tasks, key=task_key)
    levels: dict[str, list[TaskResult]] = {}
    for task in ordered:
        levels.setdefault(task.level, []).append(task)
    return BenchResults(
        generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        run=dict(run),
        overall=compute_metrics(ordered),
        levels={level: compute_metrics(levels[level]) for level in sorted(levels, key=level_key)},
        tasks=ordered,
    )


def write_results(path: Path, results: BenchResults) -> None:
    """Write results.json through a temporary file and a rename: a reader sees the old file or the new one."""
    write_atomically(Path(path), results.model_dump_json(indent=2) + "\n")


def load_results(path: Path) -> BenchResults:
    """Read a results.json (or the one in a run folder). A missing or malformed file is a KernelSkillError."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_NAME
    if not path.is_file():
        raise KernelSkillError(
            f"no benchmark results at {path}: run `kernelskill bench ... --out {path.parent}` first (it writes "
            f"{RESULTS_NAME} after every finished task), or point at the run folder that holds one"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelSkillError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KernelSkillError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): rerun "
            "`kernelskill bench --resume` on its run folder to write it again"
        ) from None
    try:
        return BenchResults.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()[:3]
        )
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise KernelSkillError(
            f"{path} is not a kernelskill results file: {problems}{more}. It may come from another version: rerun "
            "`kernelskill bench --resume` on its run folder to write it again"
        ) from None
