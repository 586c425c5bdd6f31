"""The report's tables as formatted text, shared by report.html and summary.md, and the number formats they use.

Every figure is formatted here once, at a fixed precision: speedups with 3 significant digits ("5.44x"), shares as
percentages with one decimal ("83.3%"). The HTML and the Markdown therefore show the same strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kernelskill.report.metrics import FAST_P, Metrics
from kernelskill.report.results import BenchResults, TaskResult, level_key

NONE = "—"  # shown for a figure that does not exist (no correct kernel, no baseline, no price)


# ---- number formats ---------------------------------------------------------------------------------------------

def fmt_x(value: float | None) -> str:
    """A speedup: 3 significant digits ("5.44x", "0.500x", "123x"), whole numbers from 1000 on ("1,234x")."""
    if value is None:
        return NONE
    if abs(value) >= 999.5:  # 3 significant digits would switch to an exponent here
        return f"{value:,.0f}x"
    return f"{value:#.3g}".rstrip(".") + "x"


def fmt_pct(value: float | None) -> str:
    """A share (0..1) as a percentage with one decimal: "83.3%"."""
    return NONE if value is None else f"{100 * value:.1f}%"


def fmt_ms(value: float | None) -> str:
    return NONE if value is None else f"{value:.4g}"


def fmt_int(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


def fmt_cost(value: float | None) -> str:
    return NONE if value is None else f"${value:,.4f}"


def fmt_rounds(value: float | None) -> str:
    return NONE if value is None else f"{value:.1f}"


def level_label(level: str) -> str:
    return f"Level {level}" if level.isdigit() else level


# ---- tables -----------------------------------------------------------------------------------------------------

@dataclass
class Table:
    """Rows of formatted cells. `groups` (label, span) is an optional header row above `columns`."""

    key: str  # a stable id: the HTML table's id
    title: str
    columns: list[str]
    rows: list[list[str]]
    groups: list[tuple[str, int]] = field(default_factory=list)
    note: str = ""
    wrap: tuple[int, ...] = ()  # columns whose long words may break anywhere (task names, flags)


def _level_rows(results: BenchResults) -> list[tuple[str, Metrics]]:
    return [(level_label(level), m) for level, m in results.levels.items()] + [("Overall", results.overall)]


def summary_table(results: BenchResults) -> Table:
    """The paper's table (Success, Speedup, Fast_1 per level and overall) with the other figures beside it."""
    columns = ["Level", "Tasks", "Success", "Speedup", "Fast_1", "Geomean", "Median", "Speedup (all)",
               *(f"fast_{p}" for p in FAST_P), "Noisy"]
    rows = [
        [label, fmt_int(m.tasks), fmt_pct(m.success), fmt_x(m.speedup_mean), fmt_pct(m.fast_1),
         fmt_x(m.speedup_geomean), fmt_x(m.speedup_median), fmt_x(m.speedup_mean_all),
         *(fmt_pct(m.fast_p.get(p)) for p in FAST_P), fmt_int(m.noisy)]
        for label, m in _level_rows(results)
    ]
    return Table(
        "summary-table", "Results vs PyTorch eager", columns, rows,
        note="Success: share of tasks with a correct kernel. Speedup, Geomean, Median: over the tasks with a correct "
             "kernel (eager time / best kernel time). Speedup (all): over all tasks, a task without a correct kernel "
             "counting 1.0. Fast_1 and fast_p: share of all tasks whose correct kernel reaches speedup >= p. Noisy: "
             "tasks whose best kernel's timing was too spread or skewed to trust (its speedup is marked noisy).",
    )


def precision_table(results: BenchResults) -> Table | None:
    """Success and Speedup with and without reduced-precision results; None when no task recorded precision."""
    if results.overall.success_full_precision is None:
        return None
    columns = ["Level", "Tasks", "Success", "Speedup", "Best in reduced precision", "Success (fp32)", "Speedup (fp32)"]
    rows = [[label, fmt_int(m.tasks), fmt_pct(m.success), fmt_x(m.speedup_mean), fmt_int(m.reduced_precision),
             fmt_pct(m.success_full_precision), fmt_x(m.speedup_mean_full_precision)]
            for label, m in _level_rows(results)]
    return Table(
        "precision-table", "Without reduced-precision results", columns, rows,
        note="A result in reduced precision passes the configured tolerance but not atol = rtol = 1e-4 on an fp32 "
             "problem while its code or its kernels compute in fp16, bf16, fp8 or TF32 (flag reduced_precision). "
             "(fp32): each task's fastest correct kernel that is not so flagged; a task whose every correct kernel "
             "is counts as unsolved there. " + tf32_statement(results),
    )


def tf32_statement(results: BenchResults) -> str:
    """What TF32 switches the references ran under, as the reviews recorded them (the same for both sides of a
    review: a candidate's switch is recorded and undone before the next review)."""
    seen: dict[str, list[str]] = {}
    for t in results.tasks:
        if t.reference_tf32:
            said = ", ".join(f"{k} {'on' if v is True else 'off' if v is False else v}"
                             for k, v in sorted(t.reference_tf32.items()))
            seen.setdefault(said, []).append(t.name)
    if not seen:
        return "The references' TF32 switches were not recorded."
    if len(seen) == 1:
        return f"Every reference ran with {next(iter(seen))}."
    return "The references ran with " + "; ".join(f"{said} ({len(names)} tasks)" for said, names in seen.items()) + "."


def compile_table(results: BenchResults) -> Table | None:
    """The same figures against torch.compile; None when the run took no compile baseline."""
    if results.overall.vs_compile is None:
        return None
    columns = ["Level", "With baseline", "Compared", "Speedup", "Fast_1", "Geomean", "Median",
               *(f"fast_{p}" for p in FAST_P), "compile/eager (mean)", "compile/eager (geomean)"]
    rows = []
    for label, m in _level_rows(results):
        c = m.vs_compile
        if c is None:
            rows.append([label, "0", "0", *([NONE] * (len(columns) - 3))])
            continue
        rows.append([label, fmt_int(c.tasks_with_baseline), fmt_int(c.tasks_compared), fmt_x(c.speedup_mean),
                     fmt_pct(c.fast_1), fmt_x(c.speedup_geomean), fmt_x(c.speedup_median),
                     *(fmt_pct(c.fast_p.get(p)) for p in FAST_P), fmt_x(c.compile_vs_eager_mean),
                     fmt_x(c.compile_vs_eager_geomean)])
    return Table(
        "compile-table", "Results vs torch.compile", columns, rows,
        note="Over the tasks that have a torch.compile baseline. Speedup: compile time / best kernel time on the GPU, "
             "over the tasks with a correct kernel; Fast_1 and fast_p: share of the tasks with a baseline. "
             "compile/eager: what torch.compile alone gains over eager. The task table adds each task's speedup "
             "over torch.compile when called back to back from Python, where a compiled module's per-call host "
             "work can set the pace.",
    )


def effort_table(results: BenchResults) -> Table:
    columns = ["Level", "Tasks", "Tokens", "Tokens / task", "Cost", "Rounds to best (mean)"]
    rows = [[label, fmt_int(m.tasks), fmt_int(m.tokens), fmt_int(round(m.tokens / m.tasks)) if m.tasks else NONE,
             fmt_cost(m.cost_usd), fmt_rounds(m.rounds_to_best)] for label, m in _level_rows(results)]
    return Table("effort-table", "What it cost", columns, rows,
                 note="Cost: the sum of the calls with a known price (— when no price is known). Rounds to best: "
                      "the round (0 = seeds) that produced the final best kernel, over the tasks with a correct "
                      "kernel.")


def ablation_table(runs: Sequence[tuple[str, BenchResults]]) -> Table:
    """Runs side by side: one column group (Success, Speedup, Fast_1) per run; rows = every level seen, overall."""
    levels = sorted({level for _, res in runs for level in res.levels}, key=level_key)
    rows = []
    for level in [*levels, None]:
        row = [level_label(level) if level is not None else "Overall"]
        for _, res in runs:
            m = res.overall if level is None else res.levels.get(level)
            row += [NONE] * 3 if m is None else [fmt_pct(m.success), fmt_x(m.speedup_mean), fmt_pct(m.fast_1)]
        rows.append(row)
    return Table(
        "ablation-table", "Runs compared", ["Level", *(["Success", "Speedup", "Fast_1"] * len(runs))], rows,
        groups=[("", 1), *((label, 3) for label, _ in runs)],
        note="Each run is labelled by its ablation setting, or by its folder when it has none.",
    )


def task_columns(with_compile: bool) -> list[str]:
    return ["Task", "Status", "Best speedup", "Median", "Spread",
            *(["vs compile", "vs compile, back to back"] if with_compile else []),
            "Eager ms", "Best ms", *(["Compile ms"] if with_compile else []), "% of floor", "Rounds", "Rounds to best",
            "Tokens", "Cost", "Flags"]


def task_row(task: TaskResult, with_compile: bool) -> list[str]:
    compile_cells = [fmt_x(task.speedup_vs_compile), fmt_x(task.speedup_vs_compile_host_paced)] if with_compile else []
    # the figure's doubts beside it (TaskOutcome.speedup_caveats), each in its short name
    doubts = [c.split(" (", 1)[0] for c in task.speedup_caveats]
    best = fmt_x(task.best_speedup) + (f" ({', '.join(doubts)})" if doubts else "")
    spread = NONE if task.best_spread is None else f"±{task.best_spread:.0%}"
    return [task.name, task.status, best, fmt_x(task.best_speedup_median), spread, *compile_cells,
            fmt_ms(task.eager_ms), fmt_ms(task.best_ms), *([fmt_ms(task.compile_ms)] if with_compile else []),
            NONE if task.pct_of_sol is None else f"{task.pct_of_sol:.3g}%", str(task.rounds_run),
            NONE if task.rounds_to_best is None else str(task.rounds_to_best), fmt_int(task.tokens),
            fmt_cost(task.cost_usd), ", ".join(task.flags)]


# ---- Markdown ---------------------------------------------------------------------------------------------------

def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table under a heading. Column groups are folded into the column names."""
    columns = table.columns
    if table.groups:
        names = [label for label, span in table.groups for _ in range(span)]
        columns = [f"{group} {col}".strip() for group, col in zip(names, columns)]
    lines = [f"## {table.title}", "", _md_row(columns), "|" + "|".join(
        " --- " if i == 0 else " ---: " for i in range(len(columns))) + "|"]
    lines += [_md_row(row) for row in table.rows]
    if table.note:
        lines += ["", table.note]
    return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"
