"""The report's plots, drawn with matplotlib's SVG backend and returned as inline <svg> text.

matplotlib is imported inside the functions (it takes a second or two, and only `report` needs it). No pyplot: each
figure is a plain `Figure` saved to SVG, so no global backend or figure registry is touched and no display is
needed. Text stays SVG text (svg.fonttype "none"), which keeps the files small and searchable; the ids matplotlib
generates are salted per plot, so the same results always give the same SVG and several plots can share one page.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable, Sequence
from functools import wraps
from typing import TypeVar

from kernelskill.report.metrics import has_correct_kernel
from kernelskill.report.results import TaskResult
from kernelskill.report.tables import level_label

EAGER_COLOR = "#1f77b4"
COMPILE_COLOR = "#ff7f0e"
MISS_COLOR = "#999999"
WIDTH_IN = 11.0

F = TypeVar("F", bound=Callable)


def _styled(func: F) -> F:
    """Run a plot function under the report's matplotlib settings (read when each artist is made), leaving the
    caller's settings as they were."""

    @wraps(func)
    def wrapper(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context({"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8}):
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@_styled
def distribution_svg(levels: dict[str, list[TaskResult]], key: str) -> str:
    """One box per level (with every task as a dot) of the best speedups vs eager, log-scale x."""
    fig = _figure(WIDTH_IN, 1.2 + 0.6 * max(1, len(levels)))
    ax = fig.add_subplot()
    labels, data = [], []
    for level, tasks in levels.items():
        speedups = [t.best_speedup for t in tasks if has_correct_kernel(t)]
        labels.append(f"{level_label(level)} (n={len(speedups)} of {len(tasks)})")
        data.append(speedups)
    positions = list(range(len(labels), 0, -1))  # first level on top
    filled = [(pos, d) for pos, d in zip(positions, data) if d]
    if filled:
        ax.boxplot([d for _, d in filled], positions=[pos for pos, _ in filled], orientation="horizontal",
                   widths=0.5, showfliers=False, medianprops={"color": "black"})
        for pos, d in filled:
            jitter = [pos + 0.18 * (((i * 7919) % 13) / 12 - 0.5) for i in range(len(d))]  # deterministic
            ax.scatter(d, jitter, s=14, color=EAGER_COLOR, alpha=0.7, zorder=3)
        _log_x(ax, [v for _, d in filled for v in d])
    else:
        _empty(ax, "no task has a correct kernel yet")
    ax.set_yticks(positions, labels)
    ax.set_ylim(0.4, len(labels) + 0.6)
    ax.set_xlabel("best speedup vs PyTorch eager (log scale; tasks with a correct kernel)")
    return _svg(fig, key, "Speedup distribution per level")


@_styled
def per_task_svg(tasks: Sequence[TaskResult], level: str, key: str) -> str:
    """One row per task: its best speedup vs eager (dot) and vs torch.compile (diamond), log-scale x."""
    n = max(1, len(tasks))
    fig = _figure(WIDTH_IN, 1.1 + 0.24 * n)
    ax = fig.add_subplot()
    ys = list(range(len(tasks), 0, -1))
    labels, colors = [], []
    eager_pts, compile_pts = [], []
    for y, task in zip(ys, tasks):
        solved = has_correct_kernel(task)
        missing = "no correct kernel" if task.status in ("finished", "failed") else task.status
        labels.append(task.name if solved else f"{task.name} ({missing})")
        colors.append("black" if solved else MISS_COLOR)
        if solved:
            eager_pts.append((task.best_speedup, y))
            if task.speedup_vs_compile is not None:
                compile_pts.append((task.speedup_vs_compile, y))
    values = [v for v, _ in eager_pts + compile_pts]
    for v, y in eager_pts + compile_pts:
        ax.plot([1.0, v], [y, y], color="#cccccc", linewidth=1, zorder=1)
    if eager_pts:
        ax.scatter(*zip(*eager_pts), s=28, color=EAGER_COLOR, label="vs eager", zorder=3)
    if compile_pts:
        ax.scatter(*zip(*compile_pts), s=28, marker="D", color=COMPILE_COLOR, label="vs torch.compile", zorder=3)
    if values:
        _log_x(ax, values)
        ax.legend(loc="lower right", fontsize=8, frameon=True)
    else:
        _empty(ax, "no task of this level has a correct kernel yet")
    ax.set_yticks(ys, labels, fontsize=8)
    for tick, color in zip(ax.get_yticklabels(), colors):
        tick.set_color(color)
    ax.set_ylim(0.4, n + 0.6)
    if n > 25:  # a tall plot: the scale at the top as well
        ax.tick_params(axis="x", which="both", top=True, labeltop=True)
    ax.set_xlabel("best speedup (log scale)")
    ax.set_title(f"{level_label(level)}: best speedup per task", fontsize=10)
    return _svg(fig, key, f"{level_label(level)}: best speedup per task")


def best_by_round(task: TaskResult) -> list[tuple[int, float | None]]:
    """(round, best speedup after it) for each round the task's history records; None before the first correct
    kernel. A round with several lines (the seeds) gives the highest best speedup among them."""
    by_round: dict[int, float | None] = {}
    for rec in task.history:
        r, best = rec.round, rec.best_speedup
        prev = by_round.get(r)
        by_round[r] = best if prev is None else prev if best is None else max(prev, best)
    out, carried = [], None
    for r in sorted(by_round):
        value = by_round[r]
        carried = value if value is not None else carried
        out.append((r, carried))
    return out


@_styled
def convergence_svg(tasks: Sequence[TaskResult], level: str, key: str) -> str:
    """Best speedup by round: a thin line per task, and the level's mean (over the tasks with a correct kernel by
    that round; a task that ended early keeps its final best)."""
    from matplotlib.ticker import MaxNLocator

    fig = _figure(WIDTH_IN, 3.6)
    ax = fig.add_subplot()
    series = {t.name: best_by_round(t) for t in tasks}
    last = max((r for s in series.values() for r, _ in s), default=0)
    values = []
    many = len(tasks) > 10  # many tasks: one colour, and one legend entry for them all
    for name, points in series.items():
        pts = [(r, v) for r, v in points if v is not None]
        if pts:
            style = {"color": "#4c72b0", "alpha": 0.3} if many else {"alpha": 0.5}
            label = ("one thin line per task" if not values else None) if many else name
            ax.plot(*zip(*pts), drawstyle="steps-post", linewidth=1, marker="o", markersize=2.5, label=label,
                    **style)
            values += [v for _, v in pts]
    means = []
    for r in range(last + 1):
        at_r = []
        for points in series.values():
            known = [v for pr, v in points if pr <= r and v is not None]
            if known:
                at_r.append(known[-1])
        if at_r:
            means.append((r, sum(at_r) / len(at_r)))
    if means:
        ax.plot(*zip(*means), color="black", linewidth=2.5, drawstyle="steps-post",
                label="mean over tasks with a correct kernel")
        # outside the axes, so it hides no line however many tasks it names
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        lo, hi = min(values), max(values)
        ax.set_yscale("log")
        ax.set_ylim(min(lo, 1.0) / 1.3, max(hi, 1.0) * 1.3)
        ax.axhline(1.0, color="#888888", linewidth=0.8, linestyle="--")
        _plain_ticks(ax.yaxis)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        _empty(ax, "no task of this level has a correct kernel yet")
        ax.set_yticks([])
    ax.set_xlim(-0.2, max(1, last) + 0.2)
    ax.set_xlabel("round (0 = seeds)")
    ax.set_ylabel("best speedup vs eager (log)")
    ax.set_title(f"{level_label(level)}: best speedup by round", fontsize=10)
    return _svg(fig, key, f"{level_label(level)}: best speedup by round")


# ---- plumbing ---------------------------------------------------------------------------------------------------

def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _log_x(ax, values: Sequence[float]) -> None:
    lo, hi = min(min(values), 1.0), max(max(values), 1.0)
    ax.set_xscale("log")
    ax.set_xlim(lo / 1.5, hi * 1.5)
    ax.axvline(1.0, color="#888888", linewidth=0.8, linestyle="--", zorder=0)
    ax.grid(axis="x", which="major", color="#eeeeee", zorder=0)
    _plain_ticks(ax.xaxis)


def _plain_ticks(axis) -> None:
    """Log axes label ticks as 0.5, 1, 2, 10 instead of 10^-1 (short ranges would otherwise show no label)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color=MISS_COLOR)
    ax.set_xticks([])


def _svg(fig, key: str, title: str) -> str:
    """The figure as an <svg> element to paste into HTML: no XML prologue, no comments, no metadata, no namespace
    declarations (the HTML parser supplies them), ids prefixed with `key`, scaling with the page."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": key}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.DOTALL)
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)
    # matplotlib names groups "axes_1", "patch_2" … in every figure: prefix every id (and every reference to one)
    # with the plot's key, so that ids stay unique on a page holding many plots
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{key}-{m.group(1)}"', svg)
    svg = re.sub(r'(url\(#|href="#)([^)"]+)', lambda m: f"{m.group(1)}{key}-{m.group(2)}", svg)
    head_end = svg.index(">")
    head = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg[:head_end])
    head = head.replace("<svg", f'<svg class="plot" data-plot="{html.escape(key)}" role="img" '
                                f'aria-label="{html.escape(title)}" style="max-width:100%;height:auto"', 1)
    return head + svg[head_end:]
