"""What a `--resume` may change: nothing that alters results, so one run folder never mixes two experiments.

`optimize --resume` and `bench --resume` both compare the settings the run was started with (its config in run.db)
with the ones the resuming command asks for, and refuse, naming every difference, when they disagree: a resumed
benchmark with another --problems folder, other seeds, another model or other review settings would otherwise
report one table over two problem sets or two protocols. Keys listed in `may_raise` may grow (more rounds continue
the same trajectory, a larger budget lets it spend more); keys in IGNORED describe where or when a run ran, not what
it measured. A setting the resuming command does not give is the run's own (loop/setup.py with_run_settings).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kernelskill.errors import KernelSkillError

# config keys that may differ between the start and a resume: provenance, or where evaluations are placed
IGNORED = frozenset({"kernelskill", "started", "finished", "gpus", "placement", "ray", "run_dir", "run_id",
                     "problem", "loop.parallel_seeds", "review.sandbox"})  # confinement guards the host, not a figure
# the option that sets each compared setting, to name it the way the user typed it
FLAGS = {
    "problems": "--problems", "levels": "--level", "tasks": "--tasks", "model": "--model", "base_url": "--base-url",
    "backend": "--backend", "device": "--device", "ablation": "--ablation", "baseline": "--baseline",
    "seeds": "--seeds", "rounds": "--rounds", "loop.seeds": "--seeds", "loop.rounds": "--rounds", "loop.rt": "--rt",
    "loop.at": "--at", "loop.long_term_memory": "--no-long-term-memory (or --ablation)",
    "loop.short_term_memory": "--no-short-term-memory (or --ablation)", "loop.max_repairs": "--max-repairs",
    "loop.profile": "--profile", "review.trials": "--trials", "review.iters": "--iters", "review.warmup": "--warmup",
    "review.allow_torch_ops": "--allow-torch-ops", "review.atol": "--atol", "review.rtol": "--rtol",
    "review.device": "--device", "review.backend": "--backend", "budget.max_tokens": "--max-tokens-per-task",
    "budget.max_cost": "--max-cost-per-task",
}
_PATHS = frozenset({"problems"})  # compared as the folders they name, so runs/x and ./runs/x/ agree


def differences(started: dict, requested: dict, *, may_raise: frozenset[str] = frozenset()) -> list[str]:
    """Each setting that differs, as "--flag: <started> when the run started, <requested> now"."""
    old, new = _flatten(started), _flatten(requested)
    found: dict[str, str] = {}
    for key in sorted(set(old) | set(new)):
        parts = key.split(".")
        if any(".".join(parts[:n]) in IGNORED for n in range(1, len(parts) + 1)):
            continue
        a, b = old.get(key), new.get(key)
        if key in _PATHS:
            a, b = _folder(a), _folder(b)
        if a == b or (key in may_raise and _is_raise(a, b)):
            continue
        name = FLAGS.get(key, key)
        found.setdefault(name, f"{name}: {_show(a)} when the run started, {_show(b)} now")
    return list(found.values())


def stored_run(run_dir: Path, *, kind: str) -> tuple[str, dict]:
    """The model and config of the latest run in `run_dir` (a resume fills every setting it was not given from
    these), or a KernelSkillError saying there is nothing of that kind to resume."""
    from kernelskill.store.runstore import RunStore

    with RunStore.open(run_dir) as store:
        run = store.latest_run()
    if run is None or run.kind != kind:
        raise KernelSkillError(f"{Path(run_dir) / 'run.db'} holds no {kind} run to resume")
    return run.model, dict(run.config)


def refuse_changes(run_dir: Path, started: dict, requested: dict, *, may_raise: frozenset[str] = frozenset()) -> None:
    """Raise (exit 2) when the resuming command's settings differ from the run's, naming each difference."""
    diffs = differences(started, requested, may_raise=may_raise)
    if diffs:
        raise KernelSkillError(
            f"cannot resume the run in {run_dir} with other settings than it started with ({'; '.join(diffs)}): "
            "leave those options out (a resume takes the run's own), or start a new run with another --out"
            + (" (more --rounds and larger budgets are allowed)" if "loop.rounds" in may_raise else "")
        )


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): value}


def _folder(value: Any) -> Any:
    return os.path.realpath(value) if isinstance(value, str) else value


def _is_raise(a: Any, b: Any) -> bool:
    return (isinstance(a, (int, float)) and isinstance(b, (int, float)) and b >= a)


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return str(value)
