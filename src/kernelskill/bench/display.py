"""Live progress of `bench`: a status line (tasks done, success so far, mean speedup, tokens, cost) and one line per
finished task."""

from __future__ import annotations

import statistics

from rich.console import Console
from rich.markup import escape

from kernelskill.bench.runner import BenchEvent
from kernelskill.loop.display import SpinnerDisplay
from kernelskill.report.results import TaskResult


class BenchDisplay(SpinnerDisplay):
    def __init__(self, console: Console, verbose: bool = False) -> None:
        super().__init__(console)
        self.verbose = verbose  # also print every round of every task
        self.total = 0
        self.done: dict[str, TaskResult] = {}
        self.running: set[str] = set()

    def line(self) -> str:
        results = list(self.done.values())
        ok = [r for r in results if r.success and r.best_speedup]
        mean = f"{statistics.fmean(r.best_speedup for r in ok):.3g}x" if ok else "-"
        tokens = sum(r.tokens for r in results)
        costs = [r.cost_usd for r in results if r.cost_usd is not None]
        cost = f"${sum(costs):.2f}" if costs else "cost unknown"
        noisy = sum(r.timing_noisy is not None for r in ok)
        reduced = sum(bool(r.best_reduced_precision) for r in ok)
        said = [f"{noisy} noisy"] * bool(noisy) + [f"{reduced} in reduced precision"] * bool(reduced)
        return (f"tasks {len(results)}/{self.total} done, {len(self.running)} running; success {len(ok)}/"
                f"{len(results) or 0}; mean speedup {mean}" + (f" ({', '.join(said)})" if said else "")
                + f"; {tokens} tokens; {cost}")

    def __call__(self, e: BenchEvent) -> None:
        if e.kind == "start":
            self.total = e.total
            self.console.print(e.text, style="dim", highlight=False, soft_wrap=True)
        elif e.kind == "task_started" and e.task:
            self.running.add(e.task)
        elif e.kind == "task_done" and e.task and e.result is not None:
            self.running.discard(e.task)
            self.done[e.task] = e.result
            r = e.result
            if r.status == "failed":
                what = f"[red]failed[/]: {escape((r.reason or '').splitlines()[0][:160] if r.reason else '')}"
            elif r.success:
                what = f"[green]correct[/], {r.best_speedup:.3g}x" if r.best_speedup else "[green]correct[/]"
                if r.best_speedup and r.best_speedup_median is not None:
                    what += f" (median {r.best_speedup_median:.3g}x, spread ±{(r.best_spread or 0.0):.0%})"
                if r.speedup_vs_compile:
                    what += f", {r.speedup_vs_compile:.3g}x vs torch.compile"
                    paced = r.speedup_vs_compile_host_paced
                    if paced and abs(paced / r.speedup_vs_compile - 1) > 0.1:  # its host, not its GPU, sets the pace
                        what += f" ({paced:.3g}x at the launches' pace)"
                if r.timing_noisy:
                    what += f" [yellow]noisy: {escape(r.timing_noisy)}[/]"
                if r.best_reduced_precision:
                    fp32 = f"{r.best_speedup_full_precision:.3g}x" if r.best_speedup_full_precision else "none"
                    what += f" [yellow]reduced precision (fastest fp32 kernel: {fp32})[/]"
            else:
                last = next((h.reason for h in reversed(r.history) if h.reason), None)
                what = "[yellow]no correct kernel[/]" + (f" (last: {escape(last)})" if last else "")
            extra = f" [dim]{e.text}[/]" if e.text else ""
            self.console.print(f"{e.task}: {what}{extra}", highlight=False, soft_wrap=True)
        elif e.kind == "warm":  # the compile baseline's warm-up, before the tasks: a line per task, then a total
            line = f"{e.task}: {e.text}" if e.task else e.text
            self.console.print(escape(line), style="dim", highlight=False, soft_wrap=True)
        elif e.kind == "round" and self.verbose:
            self.console.print(f"  {e.task}: {e.text}", highlight=False, soft_wrap=True)
        if self._status is not None:
            self._status.update(self.line())


def print_summary(out: Console, results) -> None:
    """A finished bench's last lines: the paper's metrics, noisy timings, and where the device's time went."""
    o = results.overall
    mean = "-" if o.speedup_mean is None else f"{o.speedup_mean:.3g}x"
    median = "-" if o.speedup_median is None else f"{o.speedup_median:.3g}x"
    out.print(f"[bold]{o.tasks} tasks: success {o.success:.1%}, mean speedup {mean}, median {median} (tasks with "
              f"a correct kernel), fast_1 {o.fast_1:.1%}[/]")
    if o.noisy:
        out.print(f"[yellow]{o.noisy} of {o.solved} correct kernels were timed noisily[/]: their speedups are "
                  "marked noisy in results.json (timing_noisy) and the report", soft_wrap=True)
    keys = ("gpu_wait", "verify", "time", "profile", "review_wall", "gpu_held", "turn_wait")
    stages = {k: sum(t.stage_seconds.get(k, 0.0) for t in results.tasks) for k in keys}
    if stages["review_wall"]:
        busy = sum(stages[k] for k in ("verify", "time", "profile"))
        held = (f"; the reviews held the device {stages['gpu_held']:.0f} s (gpu_held, added up over reviews that "
                "shared it)" if stages["gpu_held"] else "")
        turns = (f"; their steps waited {stages['turn_wait']:.0f} s for their turn on a shared device (turn_wait)"
                 if stages["turn_wait"] else "")
        out.print(f"the device waited {stages['gpu_wait']:.0f} s on builds not yet finished (gpu_wait); verify, time "
                  f"and profile took {busy:.0f} s of the reviews' {stages['review_wall']:.0f} s{held}{turns}",
                  soft_wrap=True, highlight=False)
