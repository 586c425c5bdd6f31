"""Every command's --help is readable on an 80-column terminal: no option name or help word is cut short."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from kernelskill import cli


def commands() -> list[tuple[list[str], object]]:
    """(path, command) of every command and group, from typer's own command tree."""
    if not any(group.name == "cache" for group in cli.app.registered_groups):
        cli._mount_optional()
        cli._mount_cache()
    root = typer.main.get_command(cli.app)
    found, pending = [], [([], root)]
    while pending:
        path, command = pending.pop()
        found.append((path, command))
        if hasattr(command, "commands"):  # a group
            pending += [([*path, name], sub) for name, sub in command.commands.items()]
    return sorted(found, key=lambda item: item[0])


COMMANDS = commands()


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "kernelskill" for p, _ in COMMANDS])
def test_help_fits_80_columns_without_cutting_anything(path, command):
    result = CliRunner().invoke(cli.app, [*path, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"},
                                terminal_width=80)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "…" not in text, f"`kernelskill {' '.join(path)} --help` cuts text at 80 columns:\n{text}"
    assert max(len(line) for line in text.splitlines()) <= 80
    tokens = set(text.replace(",", " ").split())
    for param in command.params:
        for name in param.opts + param.secondary_opts:
            if name.startswith("--"):
                assert name in tokens, f"{name} is not shown whole in `kernelskill {' '.join(path)} --help`"
