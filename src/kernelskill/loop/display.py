"""Live progress of `optimize` and its final summary, for people (rich). Machines read summary.json or --json."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table

from kernelskill.loop.context import Event
from kernelskill.loop.outcome import RoundRecord

_VERDICT_STYLE = {"correct": "green", "no_candidate": "yellow"}


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


def round_line(rec: RoundRecord) -> str:
    where = f"seed {rec.slot}" if rec.round == 0 else f"round {rec.round}"
    style = _VERDICT_STYLE.get(rec.verdict, "red")
    promoted = f"  [bold cyan]→ {rec.promoted}[/]" if rec.promoted else ""
    method = f"  {rec.method}" if rec.method else ""
    # the reason and the note quote compilers and reviews: "[0, 3]" must print as text, not as Rich markup
    reason = f"  [{style}]{escape(rec.reason)}[/]" if rec.reason else ""
    note = f"  [dim]{escape(rec.note)}[/]" if rec.note else ""
    return (f"{where:>9}  {rec.branch:<8}{method}  [{style}]{rec.verdict}[/]  {_x(rec.speedup)}"
            f"  best {_x(rec.best_speedup)}{promoted}{reason}{note}")


class SpinnerDisplay:
    """A console with a status line that a `with` block keeps spinning; subclasses print and update it."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None

    def __enter__(self):
        self._status = self.console.status("starting", spinner="dots")
        self._status.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._status is not None:
            self._status.stop()


class LiveDisplay(SpinnerDisplay):
    """One line per finished round, and a spinner naming what runs now (the agent asked, the kernel reviewed)."""

    def __call__(self, event: Event) -> None:
        if event.kind == "phase":
            if self._status is not None:
                self._status.update(event.text)
            if event.text.startswith("resuming"):
                self.console.print(f"[bold]{event.text}[/]")
        elif event.kind == "info":
            self.console.print(event.text, style="dim", highlight=False, soft_wrap=True)
        elif event.kind == "round" and event.record is not None:
            self.console.print(round_line(event.record), highlight=False, soft_wrap=True)


def print_summary(summary, console: Console) -> None:
    """The end-of-run summary: outcome, where the kernel is, what it cost."""
    if summary.success:
        ms = f" ({summary.best_ms:.4g} ms)" if summary.best_ms else ""
        caveats = summary.speedup_caveats
        # a figure with a doubt says so on the same line: five runs of the example gave 1.06x-1.55x, all "noisy"
        doubt = f"  [bold yellow]({escape('; '.join(caveats))}: not to be trusted as is)[/]" if caveats else ""
        console.print(f"[bold green]best kernel: {summary.best_label}, {_x(summary.best_speedup)} vs PyTorch "
                      f"eager[/]{ms}{doubt}", soft_wrap=True, highlight=False)
    else:
        console.print("[bold red]no correct kernel was found[/]")
    if summary.ended:
        console.print(f"[yellow]stopped early:[/] {summary.ended}", soft_wrap=True)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_row("best kernel", summary.best_path or "-")
    table.add_row("rounds", f"{summary.rounds_run} of {summary.rounds} (after {summary.seeds} seeds)")
    cost = "unknown (no price for this model)" if summary.cost_usd is None else f"${summary.cost_usd:.4f}"
    table.add_row("LLM calls", f"{summary.llm_calls} ({summary.failed_llm_calls} failed), {summary.tokens} tokens, "
                               f"cost {cost}")
    memories = [name for name, on in (("long-term", summary.long_term_memory),
                                      ("short-term", summary.short_term_memory)) if on]
    table.add_row("memories", ", ".join(memories) or "none (ablation)")
    table.add_row("run folder", summary.run_dir)
    if summary.transcript:
        table.add_row("replay with", f"--model replay:{summary.transcript}")
    table.add_row("time", f"{summary.seconds:.0f} s")
    if summary.stage_seconds:
        table.add_row("evaluation", stage_line(summary.stage_seconds))
    console.print(table)


STAGE_ORDER = ("queue", "gpu_wait", "prebuild", "start", "load", "inputs", "compile", "verify", "time", "profile", "review_wall")


def stage_line(stages: dict[str, float]) -> str:
    """Where evaluation seconds went, in pipeline order: "queue 0.0 s · start 4.1 s · compile 0.3 s …"."""
    keys = [k for k in STAGE_ORDER if k in stages] + sorted(k for k in stages if k not in STAGE_ORDER)
    return " · ".join(f"{k} {stages[k]:.1f} s" for k in keys)
