"""Show a Decision (and methods) in a terminal with rich; JSON comes from the same pydantic objects."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kernelskill.memory.tools.bench import BenchReport
from kernelskill.memory.policy.trace import Advice, Decision, ExprTrace
from kernelskill.memory.knowledge import KnowledgeBase
from kernelskill.memory.knowledge.schema import MethodSpec

_STATE_STYLE = {"true": "green", "false": "red", "unknown": "yellow", "value": ""}


def decision_json(decision: Decision) -> str:
    return json.dumps(decision.model_dump(mode="json"), indent=2)


def _fmt(value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, list):
        return f"{len(value)} rows"
    return str(value)


def _state(state: str) -> Text:
    return Text(state, style=_STATE_STYLE.get(state, ""))


def _why_unknown(t: ExprTrace) -> str:
    return ", ".join(t.missing + t.undefined)


class _Table(Table):
    """A table whose plain-string cells are shown literally (kernel names and expressions contain brackets)."""

    def add_row(self, *cells: Any, **kwargs: Any) -> None:  # type: ignore[override]
        super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kwargs)


def _table(title: str, *columns: str) -> Table:
    table = _Table(title=escape(title), title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    return table


def render_decision(decision: Advice, console: Console, kb: KnowledgeBase) -> None:
    """The advice with its whole trace, in the order the policy worked (evidence, decision, allowed methods)."""
    d = decision
    console.rule("[bold]Evidence")
    console.print(Text(f"ncu: {d.ncu_status}" + (f" - {d.ncu_note}" if d.ncu_note else "")
                       + f"   profiler: {'yes' if d.profiler else 'no'}"
                       + (f" - {d.profiler_note}" if d.profiler_note else "")
                       + f"   code: {d.code_path or 'none'}"))  # fmt: skip
    for line in d.collection:
        console.print(Text(f"  {line}", style="dim"))
    if d.kernels:
        t = _table(f"Kernels by time ({len(d.kernels)}; the hottest drives the decision)", "", "kernel", "launches",
                   "time us", "share")  # fmt: skip
        for k in d.kernels[:15]:
            hot = "*" if k.name == d.kernel else ""
            t.add_row(hot, k.name[:90], str(k.launches), _fmt(k.time_us), f"{k.share:.1%}")
        console.print(t)
    t = _table("Normalized fields (hot kernel)", "field", "value", "unit", "source")
    for f in d.fields:
        if f.status == "ok":
            t.add_row(f.id, _fmt(f.value), f.unit or "", f.source + (f" ({f.note})" if f.note else ""))
        else:
            t.add_row(f.id, Text(f.status, style="yellow"), f.unit or "", Text(f.note or "", style="dim"))
    console.print(t)
    t = _table("Run features", "feature", "value", "source")
    for f in d.run_features:
        value = _fmt(f.value) if f.status == "ok" else Text("missing", style="yellow")
        t.add_row(f.id, value, f.source or f.note or "")
    console.print(t)
    t = _table("Code features", "feature", "value", "mode", "note")
    for name, fv in d.features.items():
        value = _fmt(fv.value) if fv.status == "ok" else Text("unknown", style="yellow")
        t.add_row(name, value, fv.mode, fv.reason or "")
    console.print(t)
    console.rule("[bold]Decision")
    t = _table("Derived fields", "field", "value", "expression")
    for x in d.derived:
        t.add_row(x.id, _fmt(x.value) if x.state == "value" else Text(f"unknown ({_why_unknown(x)})", style="yellow"),
                  x.expr)  # fmt: skip
    console.print(t)
    console.print(f"[bold]Tier:[/bold] {d.tier or d.tier_trace.status} - {escape(d.tier_trace.note)}")
    console.print(Text(f"Speed of light: {_floor_line(d)}"))
    t = _table("Predicates", "predicate", "state", "inputs / missing")
    for p in d.predicates.values():
        detail = _why_unknown(p) if p.state == "unknown" else ", ".join(f"{k}={_fmt(v)}" for k, v in p.inputs.items())
        t.add_row(p.id, _state(p.state), detail)
    console.print(t)
    t = _table("Bottleneck priority rules (first true wins)", "rule", "bottleneck", "state", "missing")
    for r in d.priority_rules:
        mark = " <-" if r.id == d.bottleneck_rule else ""
        t.add_row(r.id + mark, r.bottleneck, _state(r.state), _why_unknown(r))
    console.print(t)
    by = f"rule {d.bottleneck_rule}" if d.bottleneck_rule else "fallback: no priority rule was true"
    console.print(f"[bold]Bottleneck:[/bold] {d.bottleneck} ({by})")
    t = _table(f"Cases for {d.bottleneck} (first true wins)", "case", "state", "gates", "missing")
    for c in d.cases:
        gates = " ".join(f"{g}={s}" for g, s in c.gates.items()) or "(none)"
        t.add_row(c.id + (" <-" if c.selected else ""), _state(c.state), gates, ", ".join(c.missing))
    console.print(t)
    console.print(f"[bold]Case:[/bold] {d.case}" if d.case else
                  f"[bold yellow]No case matched[/bold yellow] for {d.bottleneck}")  # fmt: skip
    t = _table("Global forbidden rules", "rule", "state", "applied", "forbids")
    for g in d.forbidden_rules:
        t.add_row(g.id, _state(g.state), "yes" if g.applied else (g.note or "no"), ", ".join(g.forbid))
    console.print(t)
    if d.vetoed:
        t = _table("Vetoed methods", "method", "rule", "why")
        for v in d.vetoed:
            t.add_row(v.method, v.rule, v.why)
        console.print(t)
    console.rule("[bold]Allowed methods, ranked" + (f" ({d.backend})" if d.backend else ""))
    if d.fallback:
        console.print(f"[bold yellow]fallback:[/bold yellow] {escape(d.fallback)}")
    if d.ranking:
        t = _table("Most promising first (estimated gain > 1 first, then the case's order)", "#", "method", "gain",
                   "case #", "why (evidence)")  # fmt: skip
        for r in d.ranking:
            gain = Text("no estimate", style="yellow") if r.gain is None else f"{r.gain:.3g}x" + (
                " (capped)" if r.capped else "")
            detail = r.why + (f" [{r.rule}; " + ", ".join(f"{k}={_fmt(v)}" for k, v in r.inputs.items()) + "]"
                              if r.rule else "")  # fmt: skip
            if r.unknown_rules:
                detail += " (unknown: " + "; ".join(r.unknown_rules) + ")"
            t.add_row(str(r.rank), r.method, gain, str(r.case_rank), detail)
        console.print(t)
    for m_id in d.allowed_methods:
        m = kb.method(m_id)
        console.print(f"[green]{m_id}[/green]: {escape(m.intent) if m else ''}")
    if not d.allowed_methods:
        console.print("[yellow](none)[/yellow]")
    if d.forbidden:
        console.print(f"[bold]Forbidden:[/bold] {', '.join(d.forbidden)}")
    for t_ in d.tried:
        speedup = f", {t_.speedup:.3g}x vs eager" if t_.speedup is not None else ""
        console.print(f"[bold]Tried on this kernel:[/bold] {t_.method} ({t_.outcome}{speedup})")
    if d.missing:
        console.print(f"[bold]Missing evidence:[/bold] {', '.join(d.missing)}")
    for c in d.caveats:
        console.print(f"[yellow]caveat:[/yellow] {escape(c)}")


def _floor_line(d: Decision) -> str:
    run = {f.id: f for f in d.run_features}
    derived = {x.id: x for x in d.derived}
    sol, fwd, pct = run.get("sol_ms"), run.get("forward_ms"), derived.get("pct_of_floor")
    if sol is None or pct is None:
        return "not in this knowledge base"
    if sol.status != "ok":
        return f"unknown ({sol.note}; give the problem's work to know it)"
    fwd_text = f"{_fmt(fwd.value)} ms ({fwd.source})" if fwd is not None and fwd.status == "ok" else "unknown"
    pct_text = f"{pct.value:.3g} %" if pct.state == "value" else "unknown"
    return f"floor {_fmt(sol.value)} ms, forward {fwd_text}: {pct_text} of the floor"


def render_methods(methods: list[MethodSpec], console: Console) -> None:
    t = _table(f"Methods ({len(methods)})", "id", "name", "intent")
    for m in methods:
        t.add_row(m.id, m.name, m.intent)
    console.print(t)


def render_method(m: MethodSpec, console: Console) -> None:
    console.print(f"[bold]{m.id}[/bold] - {escape(m.name)}\n{escape(m.intent)}\n")
    console.print("[bold]Preconditions[/bold]")
    for p in m.preconditions:
        console.print(Text(f"  - {p}"))
    console.print("[bold]Expected metric change[/bold]")
    for c in m.expected_metric_change:
        console.print(Text(f"  - {c.field}: {c.direction}" + (f" ({c.note})" if c.note else "")))
    console.print("[bold]Forbidden patterns[/bold]")
    for f in m.forbidden_patterns:
        console.print(Text(f"  - {f}"))
    console.print("[bold]CUDA[/bold]")
    console.print(Text(f"  {m.cues.cuda}"))
    console.print("[bold]Triton[/bold]")
    console.print(Text(f"  {m.cues.triton}"))


def render_bench(report: BenchReport, console: Console) -> None:
    t = _table(f"Decision benchmark: {report.manifest}", "kernel", "kind", "bottleneck / case", "tier", "% floor",
               "ranked allowed (first 4)", "expert", "hit")  # fmt: skip
    for r in report.kernels:
        hit = Text("top-1", style="green") if r.top1_hit else (
            Text(f"rank {r.first_expert_rank}", style="yellow") if r.allowed_hit else Text("miss", style="red"))
        pct = f"{r.pct_of_floor:.3g}" if r.pct_of_floor is not None else "?"
        t.add_row(r.id, r.kind, f"{r.bottleneck} / {r.case or 'no case'}", r.tier or "?", pct,
                  ", ".join(r.allowed[:4]) or "(none)", ", ".join(r.expert), hit)  # fmt: skip
    console.print(t)
    n = len(report.kernels)
    console.print(f"kernels: {n}")
    console.print(f"expert method allowed:     {report.allowed_accuracy:.1%} "
                  f"({sum(r.allowed_hit for r in report.kernels)}/{n})")  # fmt: skip
    console.print(f"expert method ranked first: {report.top1_accuracy:.1%} "
                  f"({sum(r.top1_hit for r in report.kernels)}/{n})")  # fmt: skip
    console.print(f"empty allowed set:          {len(report.empty)}" + (f" ({', '.join(report.empty)})"
                                                                        if report.empty else ""))  # fmt: skip
    for kind, s in report.by_kind.items():
        console.print(f"  {kind}: {s['kernels']:.0f} kernels, allowed {s['allowed']:.1%}, top-1 {s['top1']:.1%}")
