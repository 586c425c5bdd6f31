"""report.html: one self-contained page (inline CSS, inline SVG plots, no script, nothing fetched from anywhere).

Every value interpolated into the page goes through `esc` (html.escape); the plots are SVG text that plots.py made.
Section ids (summary, ablation, distributions, per-task, convergence, trees, flagged) are stable: tests and links
rely on them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from kernelskill.report.metrics import has_correct_kernel
from kernelskill.report.results import BenchResults, TaskResult
from kernelskill.report.tables import (
    NONE,
    Table,
    ablation_table,
    compile_table,
    effort_table,
    fmt_int,
    fmt_x,
    level_label,
    precision_table,
    summary_table,
    task_columns,
    task_row,
)
from kernelskill.report.trees import DecisionInfo, Node, TaskTree, TreeKey, tree_key

STYLE = """
:root { --fg: #1d1d1f; --muted: #6e6e73; --line: #d2d2d7; --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700;
        --accent: #0a58ca; --bg-soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); margin: 0 auto; padding: 1.5rem 2rem 4rem; max-width: 1280px; line-height: 1.45;
       font-size: 15px; }
h1 { font-size: 1.6rem; margin: 0 0 .3rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 .6rem; padding-bottom: .25rem; border-bottom: 2px solid var(--line); }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
p.lead, p.note, .muted { color: var(--muted); }
p.note { font-size: .85rem; margin: .3rem 0 1rem; max-width: 70rem; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em; }
nav.toc { background: var(--bg-soft); border: 1px solid var(--line); border-radius: 6px; padding: .5rem 1rem;
          margin: 1rem 0; }
nav.toc ol { margin: .2rem 0; padding-left: 1.3rem; columns: 2; }
nav.toc a { color: var(--accent); text-decoration: none; }
table { border-collapse: collapse; margin: .4rem 0; font-size: .88rem; }
th, td { border: 1px solid var(--line); padding: .25rem .55rem; vertical-align: top; }
td.wrap { overflow-wrap: anywhere; min-width: 9rem; }
th { background: var(--bg-soft); font-weight: 600; text-align: center; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.overall td { font-weight: 600; background: #fbfbfd; }
.scroll { overflow-x: auto; max-width: 100%; }
table.run th { text-align: left; }
table.run td { max-width: 60rem; word-break: break-word; }
figure { margin: .5rem 0 1.2rem; }
figcaption { color: var(--muted); font-size: .85rem; }
svg.plot { display: block; }
details.task { border: 1px solid var(--line); border-radius: 6px; margin: .35rem 0; padding: .3rem .7rem; }
details.task[open] { background: #fcfcfd; }
details.task > summary, details.task-table > summary, details.run > summary { cursor: pointer; }
details.run > summary { color: var(--accent); margin: .2rem 0 .6rem; }
details.task-table > summary { color: var(--accent); margin: .2rem 0; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 1.3rem; }
ul.tree { padding-left: .2rem; margin: .4rem 0; }
ul.tree ul { border-left: 1px dashed var(--line); margin-left: .4rem; }
ul.tree li { margin: .2rem 0; }
.node > * { margin-right: .35rem; }
.tag { display: inline-block; border-radius: 4px; padding: 0 .35rem; font-size: .8rem; background: #eef1f4; }
.tag.seed { background: #e8f0fe; } .tag.repair { background: #fff4e5; } .tag.optimize { background: #eaf7ee; }
.ok { color: var(--ok); font-weight: 600; } .bad { color: var(--bad); font-weight: 600; }
.promo { color: var(--accent); font-weight: 600; }
.reason { color: var(--bad); font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .8rem; }
.decision { font-size: .82rem; color: var(--muted); margin: .1rem 0 .2rem 1rem; }
.decision .chosen { color: var(--fg); font-weight: 700; text-decoration: underline; }
.flags { color: var(--warn); }
"""

SECTIONS = {
    "summary": "Summary",
    "ablation": "Runs compared",
    "distributions": "Speedup distributions",
    "per-task": "Per-task speedups",
    "convergence": "Convergence",
    "trees": "Optimization trees",
    "flagged": "Flagged results",
}


@dataclass
class Plots:
    distribution: str
    per_task: dict[str, str] = field(default_factory=dict)  # level -> svg
    convergence: dict[str, str] = field(default_factory=dict)


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def render_report(results: BenchResults, *, run_name: str, plots: Plots, trees: dict[TreeKey, TaskTree],
                  tree_note: str | None, compared: Sequence[tuple[str, BenchResults]] = ()) -> str:
    """The whole page. `compared` holds (label, results) of every run of the ablation table, this one first; with
    fewer than two runs there is no ablation section."""
    sections = [
        ("summary", _summary(results)),
        ("ablation", _table(ablation_table(compared)) if len(compared) > 1 else None),
        ("distributions", _figure(plots.distribution, "Best speedup vs eager of each task with a correct kernel; the "
                                                      "box spans the quartiles, the line is the median.")),
        ("per-task", _per_task(results, plots)),
        ("convergence", _convergence(results, plots)),
        ("trees", _trees(results, trees, tree_note)),
        ("flagged", _flagged(results)),
    ]
    present = [(key, body) for key, body in sections if body is not None]
    toc = "".join(f'<li><a href="#{key}">{esc(SECTIONS[key])}</a></li>' for key, _ in present)
    body = "".join(f'<section id="{key}"><h2>{esc(SECTIONS[key])}</h2>{content}</section>\n'
                   for key, content in present)
    title = f"KernelSkill {'optimize run' if results.run.get('kind') == 'optimize' else 'benchmark'}: {run_name}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<header id=\"run\"><h1>{esc(title)}</h1>{_header(results)}</header>\n"
        f"<nav class=\"toc\"><strong>Contents</strong><ol>{toc}</ol></nav>\n{body}</body>\n</html>\n"
    )


# ---- sections ---------------------------------------------------------------------------------------------------

def _header(results: BenchResults) -> str:
    counts: dict[str, int] = {}
    for task in results.tasks:
        counts[task.status] = counts.get(task.status, 0) + 1
    status = ", ".join(f"{n} {s}" for s, n in counts.items()) or "no tasks"
    lead = (f'<p class="lead">{esc(fmt_int(len(results.tasks)))} tasks ({esc(status)}). Written '
            f'{esc(results.generated_at or NONE)} from results.json; every figure on this page comes from it.</p>')
    unfinished = counts.get("pending", 0) + counts.get("running", 0)
    if unfinished:
        lead += (f'<p class="lead"><strong>{esc(fmt_int(unfinished))} of the {esc(fmt_int(len(results.tasks)))} tasks '
                 'are not finished</strong> (<code>--resume</code> continues the run): the figures below count them '
                 'as tasks without a correct kernel.</p>')
    rows = "".join(f"<tr><th>{esc(key)}</th><td>{esc(_plain(value))}</td></tr>" for key, value in results.run.items())
    # folded: two dozen rows of settings (the loop's and the review's as JSON) would push the summary off the first
    # screen, and what a reader opens the page for is the results
    return lead + (f'<details class="run"><summary>How this run was made: {esc(fmt_int(len(results.run)))} '
                   f'settings</summary><div class="scroll"><table class="run">{rows}</table></div></details>'
                   if rows else "")


def _summary(results: BenchResults) -> str:
    tables = [summary_table(results), precision_table(results), compile_table(results), effort_table(results)]
    return "".join(_table(t) for t in tables if t is not None)


def _per_task(results: BenchResults, plots: Plots) -> str:
    with_compile = results.overall.vs_compile is not None
    parts = []
    for level, tasks in _by_level(results).items():
        columns = task_columns(with_compile)
        table = Table(f"tasks-{_slug(level)}", f"{level_label(level)}: tasks", columns,
                      [task_row(t, with_compile) for t in tasks], wrap=(0, len(columns) - 1))  # names, flags
        caption = "Each task's best speedup vs eager" + (" and vs torch.compile" if with_compile else "") + \
                  "; the dashed line is 1x (as fast as the baseline)."
        opened = " open" if len(tasks) <= 20 else ""  # a long table stays folded under its plot
        parts.append(f"<h3>{esc(level_label(level))}</h3>" + _figure(plots.per_task.get(level, ""), caption)
                     + f'<details class="task-table"{opened}><summary>{esc(level_label(level))}: every task '
                       f"({len(tasks)})</summary>{_table(table, heading=False)}</details>")
    return "".join(parts) or '<p class="muted">No tasks.</p>'


def _convergence(results: BenchResults, plots: Plots) -> str:
    parts = [f"<h3>{esc(level_label(level))}</h3>" + _figure(
        plots.convergence.get(level, ""),
        "Best speedup after each round, one thin line per task (from its first correct kernel on); the thick line "
        "is the mean over the tasks with a correct kernel by that round, a task that ended early keeping its "
        "final best.")
        for level in _by_level(results)]
    return "".join(parts) or '<p class="muted">No tasks.</p>'


def _trees(results: BenchResults, trees: dict[TreeKey, TaskTree], note: str | None) -> str:
    parts = [('<p class="note">Each kernel grew from the one it is nested under: seeds at the top, an optimization '
              "from the base it improved on, a repair from the kernel that failed. Speedups are vs eager; → marks a "
              "promotion to best and/or base; under each optimization, the decision the policy made for it.</p>")]
    if note:
        parts.append(f'<p class="note">Note: {esc(note)}.</p>')
    for level, tasks in _by_level(results).items():
        parts.append(f"<h3>{esc(level_label(level))}</h3>")
        for task in tasks:
            parts.append(_task_tree(task, trees.get(tree_key(task))))
    return "".join(parts)


def _task_tree(task: TaskResult, tree: TaskTree | None) -> str:
    if has_correct_kernel(task):
        best = f"best {fmt_x(task.best_speedup)}"
    elif task.status in ("pending", "running") and task.best_speedup is not None:
        best = f"best so far {fmt_x(task.best_speedup)}"
    else:
        best = "no correct kernel"
    summary = (f"<code>{esc(task.name)}</code> <span class=\"muted\">{esc(task.status)} · {esc(best)} · "
               f"{esc(task.rounds_run)} round{'' if task.rounds_run == 1 else 's'}</span>")
    if task.flags:
        summary += f' <span class="flags">⚑ {esc(", ".join(task.flags))}</span>'
    body = []
    if tree is None or (not tree.roots and not tree.unproductive):
        body.append('<p class="muted">No kernel was recorded for this task.</p>')
    else:
        if tree.source == "history":
            why = f" ({esc(tree.note)})" if tree.note else ""
            body.append(f'<p class="note">Rebuilt from the history{why}: parents are inferred.</p>')
        seen: dict[str, str] = {}  # caveats already shown in this tree -> the kernel they were shown under
        body.append('<ul class="tree">' + "".join(_node(n, seen) for n in tree.roots) + "</ul>")
        if tree.unproductive:
            items = "".join(
                f"<li>{esc(_where(rec.round, rec.slot))} {esc(rec.branch)}: {esc(rec.verdict)}{_dash(rec.note)}</li>"
                for rec in tree.unproductive)
            body.append(f'<p class="muted">Steps that produced no kernel:</p><ul>{items}</ul>')
    if task.reason:
        body.append(f'<p class="muted">Reason: {esc(task.reason)}</p>')
    return (f'<details class="task" id="task-{_slug(task.level)}-{_slug(task.name)}"><summary>{summary}</summary>'
            + "".join(body) + "</details>")


def _node(node: Node, seen: dict[str, str]) -> str:
    verdict_class = "ok" if node.verdict == "correct" else "bad"
    parts = [f"<code>{esc(node.label)}</code>",
             f'<span class="muted">{esc(_where(node.round, node.slot))}</span>']
    if node.branch:
        parts.append(f'<span class="tag {esc(node.branch)}">{esc(node.branch)}</span>')
    if node.method:
        parts.append(f'<span class="method">{esc(node.method)}</span>')
    if node.verdict:
        parts.append(f'<span class="{verdict_class}">{esc(node.verdict)}</span>')
    if node.reason and node.verdict != "correct":
        parts.append(f'<span class="reason">{esc(node.reason)}</span>')
    if node.speedup is not None:
        parts.append(f'<span class="x">{esc(fmt_x(node.speedup))}</span>')
    if node.promoted:
        parts.append(f'<span class="promo">→ {esc(node.promoted)}</span>')
    if node.note:
        parts.append(f'<span class="muted">{esc(node.note)}</span>')
    decision = _decision(node.decision, node.method, node.label, seen) if node.decision else ""
    children = f"<ul>{''.join(_node(c, seen) for c in node.children)}</ul>" if node.children else ""
    return f'<li><div class="node">{" ".join(parts)}</div>{decision}{children}</li>'


def _decision(d: DecisionInfo, chosen: str | None, label: str, seen: dict[str, str]) -> str:
    allowed = ", ".join(f'<span class="chosen">{esc(m)}</span>' if m == chosen else esc(m) for m in d.allowed)
    case = esc(d.case) if d.case else "no case matched"
    if not allowed and chosen:
        # the loop opens every method not forbidden when the table allows none (loop/runner.py): say so, rather
        # than "allowed methods: none" beside the method that was applied
        methods = ('free choice (no case allowed a method, so every method not forbidden was open): the Planner '
                   f'chose <span class="chosen">{esc(chosen)}</span>')
    else:
        methods = f"allowed methods: {allowed or 'none'}"
    text = f"decision: bottleneck <b>{esc(d.bottleneck)}</b> · case <b>{case}</b> · {methods}"
    if d.forbidden:
        text += f" · forbidden: {esc(', '.join(d.forbidden))}"
    if d.caveats:
        caveats = "; ".join(collapse_missing(c) for c in d.caveats)
        if caveats in seen:  # the same evidence was missing for an earlier kernel of this task: once is enough
            text += f" · caveats: as under {esc(seen[caveats])}"
        else:
            seen[caveats] = label
            text += f" · caveats: {esc(caveats)}"
    return f'<div class="decision">{text}</div>'


_MISSING = re.compile(r"([\w.-]+) \(missing: ([^)]*)\)")


def collapse_missing(caveat: str) -> str:
    """"a (missing: x, y); b (missing: x, y); c (missing: z)" -> "a, b (missing: x, y); c (missing: z)": the
    policy's caveat lists every rule it could not evaluate, and most lack the same metrics."""
    head, sep, tail = caveat.partition(": ")
    items = [part.strip() for part in tail.split(";")] if sep else []
    matches = [_MISSING.fullmatch(item) for item in items]
    if not items or not all(matches):
        return caveat
    groups: dict[str, list[str]] = {}
    for m in matches:
        groups.setdefault(m.group(2), []).append(m.group(1))
    if len(groups) == len(items):
        return caveat
    return head + sep + "; ".join(f"{', '.join(names)} (missing: {missing})" for missing, names in groups.items())


def _flagged(results: BenchResults) -> str:
    rows = []
    for task in results.tasks:
        if not (task.flags or task.status != "finished" or task.reason):
            continue
        what = {"failed": "failed", "pending": "not started", "running": "not finished"}.get(task.status,
                                                                                           "stopped early")
        if task.status == "finished" and not task.reason:
            what = "flagged"
        link = f'<a href="#task-{_slug(task.level)}-{_slug(task.name)}"><code>{esc(task.name)}</code></a>'
        rows.append(f"<tr><td>{link}</td><td>{esc(level_label(task.level))}</td><td>{esc(what)}</td>"
                    f'<td class="num">{esc(fmt_x(task.best_speedup))}</td>'
                    f'<td class="flags">{esc(", ".join(task.flags))}</td><td>{esc(task.reason or "")}</td></tr>')
    if not rows:
        return '<p class="muted">No task was flagged, failed or left unfinished.</p>'
    return ('<p class="note">Tasks whose result carries a flag (e.g. a degenerate reference, a large speedup that was '
            "re-verified), and tasks that failed, stopped early or have not finished. Read their figures with "
            "care.</p><div class=\"scroll\"><table id=\"flagged-table\"><tr><th>Task</th><th>Level</th><th>What"
            "</th><th>Best speedup</th><th>Flags</th><th>Reason</th></tr>" + "".join(rows) + "</table></div>")


# ---- pieces -----------------------------------------------------------------------------------------------------

def _table(table: Table, heading: bool = True) -> str:
    head = ""
    if table.groups:
        head += "<tr>" + "".join(f'<th colspan="{span}">{esc(label)}</th>' for label, span in table.groups) + "</tr>"
    head += "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in table.columns) + "</tr>"
    body = []
    for row in table.rows:
        cls = ' class="overall"' if row and row[0] == "Overall" else ""
        cells = "".join(f'<td class="wrap">{esc(c)}</td>' if i in table.wrap
                        else f"<td>{esc(c)}</td>" if i == 0 or not _numeric(c) else f'<td class="num">{esc(c)}</td>'
                        for i, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    title = f"<h3>{esc(table.title)}</h3>" if heading else ""
    note = f'<p class="note">{esc(table.note)}</p>' if table.note else ""
    return f'{title}<div class="scroll"><table id="{esc(table.key)}">{head}{"".join(body)}</table></div>{note}'


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def _by_level(results: BenchResults) -> dict[str, list[TaskResult]]:
    levels: dict[str, list[TaskResult]] = {level: [] for level in results.levels}
    for task in results.tasks:
        levels.setdefault(task.level, []).append(task)
    return levels


def _numeric(cell: str) -> bool:
    return cell == NONE or bool(re.fullmatch(r"[$]?[-+0-9.,]+(x|%)?", cell))


def _where(round_: int | None, slot: int) -> str:
    if round_ is None:
        return "round ?"
    return f"seed {slot}" if round_ == 0 and slot else "seeds" if round_ == 0 else f"round {round_}"


def _dash(note: str | None) -> str:
    return f" — {esc(note)}" if note else ""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", text)


def _plain(value: object) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return "—" if value is None else str(value)

