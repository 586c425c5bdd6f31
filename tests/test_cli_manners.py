"""The command line's manners: help that fits 80 columns in groups with pasteable examples, --version, required
options marked, piped output that is not wrapped, progress around a review, and `kernelskill doctor`."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kernelskill import __version__
from kernelskill.cli import app
from kernelskill.cli_help import GroupedCommand, PlainGroup, console, review_progress

ROOT = Path(__file__).resolve().parents[1]


def command_tree() -> dict[tuple[str, ...], object]:
    """Every command and group under `kernelskill` (memory, cache and corpus included), by its path."""
    from kernelskill import cli

    if not any(group.name == "cache" for group in cli.app.registered_groups):
        cli._mount_optional()
        cli._mount_cache()
    found, pending = {}, [((), typer.main.get_command(cli.app))]
    while pending:
        path, command = pending.pop()
        found[path] = command
        pending += [((*path, name), sub) for name, sub in getattr(command, "commands", {}).items()]
    return dict(sorted(found.items()))


TREE = command_tree()
PATHS = list(TREE)
LEAVES = [path for path, command in TREE.items() if not hasattr(command, "commands")]
# a value's type where a name should be (typer's defaults): `--gpu <str>`, `--min-top1 <float range>`, `<list[Path]>`
TYPE_PLACEHOLDER = re.compile(r"<(str|bool|text|int|integer|float|file|dir|path|int range|float range|list\[.*?\])>")


def help_of(*args: str) -> str:
    r = CliRunner().invoke(app, [*args, "-h"], terminal_width=80, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    return r.output


def ids(paths) -> list[str]:
    return [" ".join(p) or "kernelskill" for p in paths]


@pytest.mark.parametrize("path", PATHS, ids=ids(PATHS))
def test_every_command_and_group_uses_the_projects_help(path):
    # before: memory, cache and corpus printed typer's default help: examples reflowed into one paragraph or
    # wrapped mid-command, no option groups, `--gpu <str>`, and their commands' lines cut to "..."
    expected = GroupedCommand if path in LEAVES else PlainGroup
    assert isinstance(TREE[path], expected), f"`kernelskill {' '.join(path)}` is a {type(TREE[path]).__name__}"


@pytest.mark.parametrize("path", PATHS, ids=ids(PATHS))
def test_help_fits_80_columns_and_shows_no_type_placeholders(path):
    text = help_of(*path)
    long = [line for line in text.splitlines() if len(line) > 80]
    assert not long, long
    assert not TYPE_PLACEHOLDER.findall(text), TYPE_PLACEHOLDER.findall(text)  # before: flags as <bool>, --model <str>
    assert "╭" not in text  # plain text, not boxes that squeeze each option's text into a narrow column
    if path not in LEAVES:  # a group lists each command with its first sentence whole, never cut to "..."
        listed = text.split("\nCommands:\n", 1)[1]
        assert "..." not in listed, listed


@pytest.mark.parametrize("path", LEAVES, ids=ids(LEAVES))
def test_every_example_is_whole_and_names_only_real_options(path):
    """Each command's help ends with examples, each a command line continued with a backslash where it is long:
    joined, it parses, so a user can paste it. Before, examples wrapped mid-command at 80 columns."""
    text = help_of(*path)
    assert "\nExamples:\n" in text, f"`kernelskill {' '.join(path)} -h` shows no examples"
    examples = text.split("Examples:\n", 1)[1]
    lines, joined = examples.splitlines(), []
    for line in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1].rstrip() + " " + line.strip()
        elif line.strip().startswith("kernelskill "):
            joined.append(line.strip())
    assert joined
    for example in joined:
        example = re.sub(r"\s+\(.*\)$", "", example)  # a trailing remark in parentheses
        args = example.split()[1:]
        if tuple(args[:len(path)]) != path:  # an example of another command (bench's shows corpus import)
            continue
        options = {a.split("=")[0] for a in args if a.startswith("--")}
        known = set(re.findall(r"(--[a-z][a-z0-9-]*)", text.split("Examples:")[0]))
        assert options <= known, (example, options - known)


def test_options_are_grouped_and_required_ones_marked():
    text = help_of("optimize")
    for group in ("Arguments:", "Model:", "Loop:", "Budget (per task):", "Review:", "Run folder:"):
        assert f"\n{group}\n" in text
    assert re.search(r"--model PROVIDER/NAME\s+\[required\]", text)  # before: not marked, shown as <str>
    assert "[required]" in help_of("bench").split("--problems", 1)[1].split("\n\n")[0]


def test_version():
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.strip() == f"kernelskill {__version__}"


def test_piped_output_is_not_wrapped():
    c = console()  # under pytest stdout is not a terminal
    c.file = io.StringIO()
    line = "results: " + "/very/long/run/folder" * 12 + "/results.json"
    c.print(line)
    assert c.file.getvalue() == line + "\n"


def test_the_optimize_summary_piped_keeps_each_line_whole(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env.update(PYTHONPATH=str(ROOT / "src"), COLUMNS="80")
    r = subprocess.run([sys.executable, "-m", "kernelskill.cli", "optimize", "examples/gelu_chain.py", "--model",
                        "replay:examples/gelu_chain.transcript.jsonl", "--seeds", "1", "--rounds", "0", "--profile",
                        "off", "--device", "cpu", "--trials", "1", "--iters", "2", "--warmup", "1",
                        "--out", str(tmp_path / "a-run-folder-with-a-rather-long-name-to-show-wrapping")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    evaluation = [line for line in r.stdout.splitlines() if line.startswith("evaluation")]
    assert len(evaluation) == 1 and evaluation[0].rstrip().endswith(" s")  # before: wrapped inside "0.0\n s"
    out = str(tmp_path / "a-run-folder-with-a-rather-long-name-to-show-wrapping")
    assert any(line.startswith("replay with") and f"{out}/transcript.jsonl" in line for line in r.stdout.splitlines())
    # the summary table's short rows end with their text, not padded to its longest row's width
    padded = [line for line in r.stdout.splitlines() if line != line.rstrip(" ")]
    assert not padded, padded[:3]


def test_a_piped_table_has_no_trailing_spaces(capsys):
    from rich.table import Table

    c = console()  # under pytest stdout is not a terminal
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_row("rounds", "3 of 3")
    table.add_row("evaluation", "queue 0.0 s · " * 30)
    c.print(table)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "rounds      3 of 3" and len(lines) == 2, lines


def test_review_progress_prints_one_plain_line_when_piped_and_nothing_for_json(capsys):
    with review_progress("reviewing c.py against p.py") as progress:
        progress.stage("verify")
    assert capsys.readouterr().err == "reviewing c.py against p.py ...\n"
    with review_progress("reviewing", quiet=True):
        pass
    assert capsys.readouterr().err == ""


def test_review_progress_hands_its_stage_callback_to_a_review_that_takes_one():
    def takes(problem, candidate, settings, log_dir=None, progress=None): ...

    def does_not(problem, candidate, settings, log_dir=None): ...

    with review_progress("x", quiet=True) as progress:
        assert progress.keywords(takes) == {"progress": progress.stage}
        assert progress.keywords(does_not) == {}


def test_the_bench_continue_command_names_the_folder_and_repeats_only_where_it_runs():
    # the run's settings come from its folder (tests/bench/test_bench_resume.py runs the printed command)
    from kernelskill.bench.runner import continue_command

    assert continue_command("runs/a b") == "kernelskill bench --out 'runs/a b' --resume"
    assert continue_command("runs/b", gpus=["0", "1"], parallel=3, ray="auto", verbose=True) == (
        "kernelskill bench --out runs/b --resume --gpus 0,1 --parallel 3 --ray auto --verbose")


def test_doctor_names_each_piece_and_what_to_do(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvcc, no ncu, no nvidia-smi
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    r = CliRunner().invoke(app, ["doctor", "--json"])
    report = json.loads(r.stdout)
    names = [c["name"] for c in report["checks"]]
    for name in ("gpu", "nvcc", "ncu", "triton", "sandbox network", "sandbox filesystem", "sandbox environment",
                 "sandbox user", "cache KERNELSKILL_CACHE", "cache TRITON_CACHE_DIR"):
        assert name in names
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["nvcc"]["state"] == "warn" and "install the CUDA toolkit" in by_name["nvcc"]["fix"]
    assert all(c["fix"] for c in report["checks"] if c["state"] in ("warn", "fail"))
    assert r.exit_code == (0 if report["ok"] else 1)


def test_doctor_reports_a_sandbox_turned_off(monkeypatch):
    monkeypatch.setenv("KERNELSKILL_SANDBOX", "environment")
    from kernelskill.doctor import _sandbox

    states = {c.name: c.state for c in _sandbox()}
    assert states["sandbox environment"] == "ok" and states["sandbox network"] == "warn"
