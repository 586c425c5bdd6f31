"""`kernelskill report RUN_DIR`: results.json (and run.db) → report.html, summary.md, tasks.csv in the run folder."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from kernelskill.errors import KernelSkillError
from kernelskill.folders import write_atomically
from kernelskill.report import plots
from kernelskill.report.html import Plots, render_report
from kernelskill.report.results import (
    RESULTS_NAME,
    BenchResults,
    TaskResult,
    build_results,
    load_results,
)
from kernelskill.report.tables import (
    ablation_table,
    compile_table,
    effort_table,
    level_label,
    precision_table,
    summary_table,
    to_markdown,
)
from kernelskill.report.trees import task_trees
from kernelskill.store import DB_NAME

HTML_NAME = "report.html"
SUMMARY_NAME = "summary.md"
CSV_NAME = "tasks.csv"
OPTIMIZE_SUMMARY = "summary.json"  # what an optimize run writes (loop/optimize.py OptimizeSummary)
CSV_COLUMNS = ("name", "level", "index", "status", "success", "best_speedup", "best_speedup_median", "best_spread",
               "best_speedup_full_precision", "best_reduced_precision", "timing_noisy", "speedup_caveats", "speedup_vs_compile",
               "speedup_vs_compile_host_paced", "eager_ms", "best_ms", "compile_ms", "sol_ms", "pct_of_sol",
               "rounds_run", "rounds_to_best", "tokens", "cost_usd", "flags", "reason", "best_path")


def write_report(run_dir: Path, compare: Sequence[Path] = (), out: Path | None = None) -> list[Path]:
    """Write report.html, summary.md and tasks.csv into `out` (default: `run_dir`) from the run's results; return
    their paths.

    `run_dir` is a `bench` run folder (its results.json) or an `optimize` one (its summary.json, as a one-task
    benchmark). `compare` names other run folders (or their results.json files) to lay beside it in an ablation
    table. The run folder is only read, so a read-only one works with `out` elsewhere.
    """
    run_dir = Path(run_dir)
    out = run_dir if out is None else Path(out)
    results = run_results(run_dir)
    compared = _compared(run_dir, results, compare)
    trees, tree_note = task_trees(run_dir, results)
    page = render_report(results, run_name=run_dir.resolve().name, plots=_plots(results), trees=trees,
                         tree_note=tree_note, compared=compared)
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in ((HTML_NAME, page),
                           (SUMMARY_NAME, summary_markdown(results, run_dir.resolve().name, compared)),
                           (CSV_NAME, tasks_csv(results.tasks))):
            write_atomically(out / name, text)
            written.append(out / name)
    except OSError as exc:
        raise KernelSkillError(
            f"cannot write the report into {out} ({exc.strerror or exc}): pass --out FOLDER to write it elsewhere"
        ) from None
    return written


def run_results(run_dir: Path) -> BenchResults:
    """The results a report shows: a bench run's results.json, else an optimize run's summary.json as one task."""
    if (run_dir / RESULTS_NAME).is_file():
        return load_results(run_dir / RESULTS_NAME)
    if (run_dir / OPTIMIZE_SUMMARY).is_file():
        return optimize_results(run_dir / OPTIMIZE_SUMMARY)
    if (run_dir / DB_NAME).is_file():
        raise KernelSkillError(
            f"{run_dir} holds a run that has not finished (no {RESULTS_NAME} or {OPTIMIZE_SUMMARY} yet): continue it "
            "with --resume, then report it"
        )
    raise KernelSkillError(
        f"{run_dir} holds no {RESULTS_NAME} or {OPTIMIZE_SUMMARY}: point `kernelskill report` at the folder a "
        "`kernelskill bench --out` or `kernelskill optimize --out` run wrote"
    )


def optimize_results(path: Path) -> BenchResults:
    """An optimize run's summary.json as the results of a one-task benchmark (its level: "optimize")."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        problem = str(data["problem"])
        task = TaskResult.model_validate({**data, "name": Path(problem).stem, "level": "optimize", "index": None,
                                          "problem": problem, "status": "finished"})
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, ValidationError) as exc:
        raise KernelSkillError(f"{path} is not an optimize run's summary ({exc.__class__.__name__}: "
                               f"{str(exc).splitlines()[0][:200]})") from None
    run = {key: data.get(key) for key in ("model", "backend", "device", "seeds", "rounds", "run_dir")}
    return build_results({"kind": "optimize", **run}, [task])


def report_command(run_dir: Path, compare: Sequence[Path] = (), console: Console | None = None,
                   out: Path | None = None) -> list[Path]:
    """What the CLI runs: write the report and say where it is."""
    console = console or Console()
    with console.status("writing the report", spinner="dots"):
        paths = write_report(run_dir, compare, out)
    for path in paths:
        console.print(f"[bold]{path.name:<12}[/] {path}", highlight=False, soft_wrap=True)
    return paths


def summary_markdown(results: BenchResults, run_name: str, compared: Sequence[tuple[str, BenchResults]] = ()) -> str:
    tables = [summary_table(results), precision_table(results), compile_table(results), effort_table(results)]
    if len(compared) > 1:
        tables.append(ablation_table(compared))
    run = results.run
    facts = ", ".join(f"{key} {run[key]}" for key in ("model", "backend", "seeds", "rounds", "ablation", "baseline")
                      if run.get(key) not in (None, ""))
    kind = "optimize run" if run.get("kind") == "optimize" else "benchmark"
    head = [f"# KernelSkill {kind}: {run_name}", ""]
    if facts:
        head += [facts, ""]
    source = "summary.json" if run.get("kind") == "optimize" else "results.json"
    head += [f"{len(results.tasks)} tasks; figures from {source} ({results.generated_at or 'no date'})."]
    unfinished = sum(t.status in ("pending", "running") for t in results.tasks)
    if unfinished:
        head += ["", f"**{unfinished} of the {len(results.tasks)} tasks are not finished** (the run was interrupted or "
                 "is still going; `--resume` continues it): the figures below count them as tasks without a correct "
                 "kernel."]
    flagged = [t for t in results.tasks if t.flags or t.reason or t.status != "finished"]
    tail = []
    if flagged:
        tail = ["## Flagged results", ""] + [
            f"- `{t.name}` ({level_label(t.level)}, {t.status}): " + _md_text("; ".join(
                part for part in (", ".join(t.flags), t.reason or "") if part) or "not finished") for t in flagged]
    blocks = ["\n".join(head)] + [to_markdown(t) for t in tables if t is not None] + ["\n".join(tail)]
    return "\n\n".join(b.strip("\n") for b in blocks if b.strip()) + "\n"


def _md_text(text: str) -> str:
    """Free text (a failure reason) in Markdown: no stray HTML, no line breaks."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def tasks_csv(tasks: Sequence[TaskResult]) -> str:
    """One row per task, full-precision numbers, empty cells for missing values, flags joined with ';'."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for task in tasks:
        values = task.model_dump()
        values["flags"] = ";".join(task.flags)
        values["speedup_caveats"] = ";".join(task.speedup_caveats)
        writer.writerow(["" if values[c] is None else values[c] for c in CSV_COLUMNS])
    return out.getvalue()


def _compared(run_dir: Path, results: BenchResults, compare: Sequence[Path]) -> list[tuple[str, BenchResults]]:
    """(label, results) of this run and each compared one; labels are the ablation setting, else the folder."""
    if not compare:
        return []
    runs = [(run_dir, results)]
    for other in map(Path, compare):
        folder = other.parent if other.is_file() else other
        if not (other.is_file() or (other / RESULTS_NAME).is_file() or (other / OPTIMIZE_SUMMARY).is_file()):
            raise KernelSkillError(
                f"--compare {other}: no {RESULTS_NAME} there; pass the folder of a `kernelskill bench --out` run "
                f"(or its {RESULTS_NAME})"
            )
        runs.append((folder, load_results(other) if other.is_file() else run_results(other)))
    labelled, seen = [], set()
    for folder, res in runs:
        ablation = res.run.get("ablation")
        label = str(ablation) if ablation not in (None, "") else folder.resolve().name
        if label in seen:
            label = f"{label} ({folder.resolve().name})"
        seen.add(label)
        labelled.append((label, res))
    return labelled


def _plots(results: BenchResults) -> Plots:
    levels: dict[str, list[TaskResult]] = {level: [] for level in results.levels}
    for task in results.tasks:
        levels.setdefault(task.level, []).append(task)
    return Plots(
        distribution=plots.distribution_svg(levels, "dist"),
        per_task={level: plots.per_task_svg(tasks, level, f"pt{i}") for i, (level, tasks) in
                  enumerate(levels.items())},
        convergence={level: plots.convergence_svg(tasks, level, f"cv{i}") for i, (level, tasks) in
                     enumerate(levels.items())},
    )
