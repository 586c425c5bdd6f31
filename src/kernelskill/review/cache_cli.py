"""`kernelskill cache ...`: what the CUDA build cache holds, and pruning it."""

from __future__ import annotations

import json
import time
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from kernelskill.cli_help import GroupedCommand, sub_app
from kernelskill.errors import KernelSkillError
from kernelskill.review.cuda import cache

cache_app = sub_app("cache", "The CUDA build cache: what it holds, and pruning it.")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]

_KIND_HELP = {
    "extension": "built extensions",
    "object": "compiled objects",
    "pch": "precompiled torch headers",
    "candidate": "a candidate's own caches (builds, JIT)",
    "check": "old compile checks",
    "failure": "sources that failed to compile",
    "unfinished": "running or killed builds",
}


def _mib(n: int | None) -> str:
    if n is None:
        return "-"
    if n >= 1024**3:
        return f"{n / 1024**3:.2f} GiB"
    return f"{n / 1024**2:.1f} MiB" if n >= 1024**2 else f"{n / 1024:.1f} KiB"


def _ago(t: float | None) -> str:
    if not t:
        return "-"
    s = max(0.0, time.time() - t)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.1f}{unit} ago"
    return f"{s:.0f}s ago"


def _limit() -> int | None:
    try:
        return cache.limit_bytes()
    except ValueError as exc:
        raise KernelSkillError(str(exc)) from None


@cache_app.command(cls=GroupedCommand, epilog="""\
Examples:
  kernelskill cache show
  kernelskill cache show --json

The cache lives in KERNELSKILL_CACHE (set it to move the cache); its limit is
KERNELSKILL_CACHE_MAX_GB.""")
def show(as_json: JsonOpt = False) -> None:
    """Where the cache is, how big it is per kind of entry, and the limit it is pruned to."""
    _limit()
    u = cache.usage()
    if as_json:
        print(json.dumps(u.to_dict(), indent=1))
        return
    console = Console(highlight=False)
    limit = "none (KERNELSKILL_CACHE_MAX_GB=off)" if u.limit_bytes is None else _mib(u.limit_bytes)
    console.print(f"cache: {u.root}  (set KERNELSKILL_CACHE to move it)", soft_wrap=True)
    console.print(f"precompiled headers: {u.headers}; candidates' own caches: {', '.join(u.candidates) or 'none yet'}"
                  " (set KERNELSKILL_SANDBOX_CACHE to move both)", soft_wrap=True)
    console.print(f"total: {_mib(u.total_bytes)}; limit: {limit}, applied when optimize or bench starts a CUDA run "
                  f"(KERNELSKILL_CACHE_MAX_GB)", soft_wrap=True)
    table = Table(show_edge=False)
    for col in ("kind", "what", "entries", "size", "oldest use", "newest use"):
        table.add_column(col, justify="right" if col in ("entries", "size") else "left")
    for k in u.kinds:
        table.add_row(k.kind, _KIND_HELP[k.kind], str(k.entries), _mib(k.bytes), _ago(k.oldest_use),
                      _ago(k.newest_use))
    console.print(table)


@cache_app.command(cls=GroupedCommand, epilog="""\
Examples:
  kernelskill cache prune                     (down to the limit, default 20 GB)
  kernelskill cache prune --max-size 5G --dry-run
  kernelskill cache prune --older-than 30d
  kernelskill cache prune --all               (everything not in use)""")
def prune(
    max_size: Annotated[Optional[str], typer.Option(  # noqa: UP045
        metavar="SIZE", help="Keep at most this much, least recently used removed first (500M, 20G ...). Default: "
        "the limit (KERNELSKILL_CACHE_MAX_GB).")] = None,
    older_than: Annotated[Optional[str], typer.Option(  # noqa: UP045
        metavar="AGE", help="Remove entries unused for this long (12h, 30d ...).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Remove every entry not in use.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go; remove nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove least recently used builds. Entries in use (locked by a build, or used in the last 10 minutes) stay.

    Removing anything is safe: what is needed again is rebuilt (seconds for a kernel, 30 s for the torch header).
    """
    try:
        max_bytes = 0 if all_ else (cache.parse_size(max_size) if max_size is not None else None)
        older_s = cache.parse_duration(older_than) if older_than is not None else None
    except ValueError as exc:
        raise KernelSkillError(str(exc)) from None
    if max_bytes is None and older_s is None:
        max_bytes = _limit()
    report = cache.prune(max_bytes=max_bytes, older_than_s=older_s, dry_run=dry_run)
    if as_json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        console = Console(highlight=False)
        verb = "would remove" if dry_run else "removed"
        for entry in report.removed:
            console.print(f"{verb} {entry['kind']:10} {entry['name']}  {_mib(entry['bytes'])}, last used "
                          f"{_ago(entry['last_used'])}", soft_wrap=True)
        for entry in report.kept_in_use:
            console.print(f"kept    {entry['kind']:10} {entry['name']}  ({entry['why']})", soft_wrap=True)
        for error in report.errors:
            console.print(f"[red]could not remove[/] {error}", soft_wrap=True)
        console.print(f"{report.root}: {_mib(report.bytes_before)} -> {_mib(report.bytes_after)} ({verb} "
                      f"{len(report.removed)} entries)", soft_wrap=True)
    if report.errors:
        raise typer.Exit(1)
