"""Rendering a ReviewResult for people (rich) and for machines (JSON)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelskill.review.results import Mismatch, Precision, ReviewResult


def to_json(result: ReviewResult) -> str:
    return json.dumps(result.model_dump(mode="json"), indent=2)


REASON_CHARS = 200


def failure_reason(error: str | None, check: str | None = None) -> str:
    """Why a review failed, in one line for a console or a report tree: the check that fired, and the first lines of
    the error (a compiler's first error, the mismatch summary). The whole error stays in the run store."""
    lines = [" ".join(line.split()) for line in (error or "").splitlines() if line.strip()][:2]
    text = " | ".join(lines)
    if check and check not in text:
        text = f"check {check}" + (f": {text}" if text else "")
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} ms" if value < 1 else f"{value:.3f} ms"


def precision_line(p: Precision) -> str:
    """The precision record in one line: dtypes seen in the code, the strict tolerance, the reference's TF32."""
    seen = [f"{', '.join(p.compute_dtypes)} (code)"] if p.compute_dtypes else []
    seen += [f"{', '.join(p.kernel_dtypes)} (its kernels' names)"] if p.kernel_dtypes else []
    parts = [f"computes in {'; '.join(seen)}" if seen else "no reduced-precision dtype seen"]
    if p.strict_tolerance_ok is not None:
        parts.append(f"{'passes' if p.strict_tolerance_ok else 'fails'} atol=rtol={p.strict_atol:g}"
                     + (f" ({p.strict_mismatched} elements outside)" if p.strict_mismatched else ""))
    tf32 = [name for name, on in p.reference_tf32.items() if on is True or on in ("high", "medium")]
    if p.reference_tf32:
        parts.append(f"reference TF32: {', '.join(tf32) or 'off'}")
    return "; ".join(parts)  # reduced_precision shows among the flags


def verdict_line(r: ReviewResult) -> str:
    if r.correct:
        return "[bold green]CORRECT[/]"
    if r.stage is None:
        return "[bold yellow]COMPILED (not run: CUDA code cannot run on this machine)[/]"
    label = {
        "compile_error": "COMPILE FAILED", "mismatch": "INCORRECT", "runtime_error": "INCORRECT (raised)",
        "rejected": "REJECTED", "timeout": "TIMEOUT", "crash": "CRASHED", "bad_candidate": "BAD CANDIDATE",
    }.get(r.error_kind or "", "FAILED")
    return f"[bold red]{label}[/] in stage [bold]{r.stage}[/]"


def _pairs(m: Mismatch) -> str:
    return ", ".join(f"{idx}: got {g:.5g}, expected {e:.5g}" for idx, g, e in zip(m.first_indices, m.got, m.expected))


def print_review(result: ReviewResult, console: Console | None = None) -> None:
    console = console or Console()
    r = result
    console.print(f"{verdict_line(r)}  ({r.backend} on {r.device_name or r.device})")
    if r.error:
        console.print(r.error, markup=False, highlight=False)
    table = Table(show_header=False, box=None, pad_edge=False)
    if r.compile is not None:
        note = " (compile check only)" if r.compile.checked_only else ""
        table.add_row("compile", f"{'ok' if r.compile.ok else 'failed'} in {r.compile.duration_s:.2f} s{note}")
        for w in r.compile.warnings[:5]:
            table.add_row("", f"warning: {w}")
    if r.verify is not None:
        v = r.verify
        table.add_row("verify", f"{v.passed}/{v.trials} trials passed (atol={v.atol:g}, rtol={v.rtol:g}); "
                      f"max abs error {v.max_abs_error:.3g}, max rel error {v.max_rel_error:.3g}")
        if v.mismatch is not None and v.mismatch.first_indices:
            table.add_row("", f"first mismatches {_pairs(v.mismatch)}")
        if v.distributions:
            skipped = "".join(f"; {name} skipped: {why}" for name, why in v.skipped_distributions.items())
            skipped += "".join(f"; {name} MISMATCHED (not part of the verdict): {why}"
                               for name, why in v.failed_distributions.items())
            table.add_row("inputs", ", ".join(v.distributions) + skipped)
    if r.judge_mismatch is not None and r.judge_mismatch.first_indices:
        table.add_row("judge", f"first mismatches {_pairs(r.judge_mismatch)}")
    if r.precision is not None and (r.precision.compute_dtypes or r.precision.kernel_dtypes
                                    or r.precision.strict_tolerance_ok is not None):
        table.add_row("precision", precision_line(r.precision))
    if r.timing is not None:
        t = r.timing
        table.add_row("reference", f"{_ms(t.reference.mean_ms)} mean, {_ms(t.reference.median_ms)} median")
        table.add_row("candidate", f"{_ms(t.candidate.mean_ms)} mean, {_ms(t.candidate.median_ms)} median")
        if t.compiled_reference is not None:
            table.add_row("torch.compile", f"{_ms(t.compiled_reference.mean_ms)} mean")
        noisy = f"; [yellow]noisy: {escape(t.noisy_reason or '')}[/], the speedup is not to be trusted" if t.noisy else ""
        table.add_row("speedup", f"[bold]{t.speedup:.2f}x[/] vs eager (mean; median {t.speedup_median:.2f}x, "
                      f"trimmed {(t.speedup_trimmed or t.speedup):.2f}x, spread ±{(t.spread or 0.0):.0%})"
                      + (f", {t.speedup_vs_compile:.2f}x vs torch.compile" if t.speedup_vs_compile else "")
                      + (f" ({t.speedup_vs_compile_host_paced:.2f}x at the launches' pace)"
                         if t.speedup_vs_compile and t.speedup_vs_compile_host_paced
                         and abs(t.speedup_vs_compile_host_paced / t.speedup_vs_compile - 1) > 0.1 else "")
                      + (f"; {t.speedup_host_paced:.2f}x at the launches' pace (a side's host is slower than its "
                         "GPU)" if t.speedup_host_paced and abs(t.speedup_host_paced / t.speedup_median - 1) > 0.1
                         else "") + noisy)
        table.add_row("timing", t.method)
    if r.flags:
        table.add_row("flags", ", ".join(r.flags))
    for c in r.checks[1:]:
        table.add_row("also", f"{c.name}: {c.detail}")
    console.print(table)
    if r.log_path and not r.correct and r.stage is not None:
        console.print(f"full worker log: {r.log_path}", style="dim")
