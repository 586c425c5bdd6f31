"""Options a user can get wrong give one line saying what to change and exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import DATA

PROBLEM = DATA / "problems/p01_pointwise_gelu_chain.py"
CANDIDATE = DATA / "candidates/p01_pointwise_gelu_chain/triton_ok.py"


def review(*args):
    return subprocess.run([sys.executable, "-m", "kernelskill.cli", "review", str(PROBLEM), str(CANDIDATE),
                           "--device", "cpu", *map(str, args)], capture_output=True, text=True, timeout=300)


def one_line_exit_2(proc, *needles):
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(("args", "needles"), [
    (("--atol", "-1"), ("--atol must be greater than or equal to 0", "-1.0")),
    (("--rtol", "nan"), ("--rtol must be greater than or equal to 0", "nan")),
    (("--rtol", "-0.5"), ("--rtol must be",)),
    (("--compile-timeout", "0"), ("--compile-timeout must be greater than 0",)),
    (("--verify-timeout", "-3"), ("--verify-timeout must be greater than 0",)),
    (("--time-timeout", "nan"), ("--time-timeout must be greater than 0",)),
])
def test_out_of_range_tolerances_and_timeouts(args, needles):
    one_line_exit_2(review(*args), *needles)


def test_log_dir_that_is_a_file(tmp_path):
    (tmp_path / "log").write_text("not a folder")
    one_line_exit_2(review("--log-dir", tmp_path / "log"), "--log-dir", "is a file, not a folder")


def test_log_dir_that_cannot_be_written(tmp_path):
    if os.geteuid() == 0:  # root writes through permissions: use a file system that refuses new entries
        target = "/sys/kernelskill-test-logs"
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        target = tmp_path / "ro" / "logs"
    one_line_exit_2(review("--log-dir", target), "--log-dir", "cannot be written")


def test_optimize_and_bench_settings_out_of_range(tmp_path):
    """(Options with a declared range are refused by the option parser itself: a usage error, also exit 2.)"""
    base = [sys.executable, "-m", "kernelskill.cli"]
    env = {**os.environ, "OPENAI_API_KEY": "sk-unused"}
    for cmd, needle in (
        (["optimize", str(PROBLEM), "--model", "openai/m", "--rt", "nan", "--out", str(tmp_path / "a")], "--rt"),
        (["bench", "--problems", str(tmp_path), "--model", "openai/m", "--max-cost-per-task", "nan", "--out",
          str(tmp_path / "b")], "--max-cost-per-task"),
    ):
        proc = subprocess.run(base + cmd, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and needle in proc.stderr, proc.stderr
        assert "greater than" in proc.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_warm_jobs_without_the_compile_baseline_is_refused_not_ignored(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kernelskill.cli", "bench", "--problems", str(DATA / "problems"),
                           "--model", "corpus:nowhere", "--warm-jobs", "2", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    one_line_exit_2(proc, "--warm-jobs", "add --baseline compile")
