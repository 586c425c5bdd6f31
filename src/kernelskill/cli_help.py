"""How `kernelskill ... -h` and the console output look: plain help in groups that fits 80 columns, and consoles
that do not wrap when piped.

Typer's boxed Rich help squeezes each option's text into a narrow third column (113 lines for `optimize -h` at 80
columns) and shows flags as `<bool>`. Like uv and ruff, the help here is plain text in named groups: each option on
one line with its value name, its text beside it, wrapped to the terminal (80 columns at most), and examples that
are printed as written, ready to paste.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

GENERAL = "Options"


class GroupedCommand(TyperCommand):
    """A command whose help lists its options under the group each names (`rich_help_panel`), in order of first
    appearance, and keeps the epilog's example lines as written."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            name = record[0]
            if getattr(param, "param_type_name", None) == "argument":
                group = "Arguments"
                name = re.sub(r" <[^|>]*>$", "", name)  # its name says what it is: `PROBLEM`, not `PROBLEM <path>`
            else:
                group = getattr(param, "rich_help_panel", None) or GENERAL
            groups.setdefault(group, []).append((name, _plain(record[1])))
        if "Arguments" in groups:  # arguments first, -h and anything ungrouped last
            groups = {"Arguments": groups.pop("Arguments"), **groups}
        if GENERAL in groups:
            groups[GENERAL] = groups.pop(GENERAL)
        for name, rows in groups.items():
            with formatter.section(name):
                formatter.write_dl(rows, col_max=32)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        write_epilog(self.epilog, formatter)


class PlainGroup(TyperGroup):
    """A group (the root, `memory`, `cache`, `corpus`): its commands listed with their first sentence whole (wrapped,
    never cut to "..."), its epilog kept as written."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.short_help or _first_sentence(command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        write_epilog(self.epilog, formatter)


def sub_app(name: str, help: str) -> typer.Typer:
    """A group of commands under the root (`kernelskill memory ...`) with the root's manners: plain help in groups,
    -h, no shell-completion options of its own. Its commands take `cls=GroupedCommand` and an epilog of examples."""
    return typer.Typer(
        name=name,
        help=help,
        no_args_is_help=True,
        add_completion=False,
        cls=PlainGroup,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


def _first_sentence(text: str) -> str:
    """The help's first sentence, whole: up to the first period that ends a sentence in the first paragraph."""
    words = text.partition("\n\n")[0].split()
    for i, word in enumerate(words):
        if word.endswith(".") and (i == len(words) - 1 or not words[i + 1][:1].islower()):
            return " ".join(words[: i + 1])
    return " ".join(words)


def write_epilog(epilog: str | None, formatter: Any) -> None:
    """The epilog line by line as written (examples must stay whole to be pasted; each is under 80 columns)."""
    if epilog:
        formatter.write_paragraph()
        for line in epilog.splitlines():
            formatter.write(line.rstrip() + "\n" if line.strip() else "\n")


def _plain(text: str) -> str:
    """Help text written for Rich markup, as plain text (`\\[ray]` is a literal `[ray]`)."""
    return text.replace("\\[", "[")


def console(stderr: bool = False) -> Console:
    """A console for results and progress. On a terminal it wraps to the terminal; piped or redirected, it never
    wraps (a line is a line: a path or a command stays whole for grep and for copying), and a table's lines end
    where their text does (its columns are as wide as the longest row, padded with spaces: with the width of a
    line that never wraps, that was hundreds of spaces after every short row)."""
    c = Console(stderr=stderr)
    if c.is_terminal:
        return c
    return Console(stderr=stderr, width=1_000, soft_wrap=True, file=_TrailingSpaceless(stderr))


class _TrailingSpaceless:
    """sys.stdout or sys.stderr, as they are when written to, without the spaces before each line's end (Rich
    writes a print's lines in one call)."""

    def __init__(self, stderr: bool) -> None:
        self.stderr = stderr

    @property
    def stream(self):
        return sys.stderr if self.stderr else sys.stdout

    def write(self, text: str) -> int:
        self.stream.write(re.sub(r" +\n", "\n", text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()


class _Progress:
    """What `review_progress` yields: stage names a long call reports, shown beside the elapsed time."""

    def __init__(self, update) -> None:
        self._update = update

    def stage(self, name: str) -> None:
        self._update(name)

    def keywords(self, fn) -> dict:
        """`progress=self.stage` for a callee that takes a `progress` callback (review() may), else nothing."""
        import inspect

        try:
            takes = "progress" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            takes = False
        return {"progress": self.stage} if takes else {}


@contextmanager
def review_progress(text: str, quiet: bool = False) -> Iterator[_Progress]:
    """On a terminal: a spinner on stderr with `text`, the current stage and the seconds elapsed, updated every
    second while the block runs. Piped: the text once, as a plain line; with `quiet` (JSON output): nothing."""
    err = Console(stderr=True)
    if quiet or not err.is_terminal:
        if not quiet:
            print(f"{text} ...", file=sys.stderr, flush=True)
        yield _Progress(lambda name: None)
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # the seconds first: a long file name may be cut at the terminal's edge, the elapsed time never
    from rich.table import Column

    columns = (
        SpinnerColumn(),
        TimeElapsedColumn(table_column=Column(min_width=7, no_wrap=True)),
        TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis")),
        TextColumn("[dim]{task.fields[stage]}", table_column=Column(no_wrap=True)),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(escape(text), stage="", total=None)
        yield _Progress(lambda name: bar.update(task, stage=escape(name)))
