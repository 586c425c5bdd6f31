"""Malformed problem files give one clear message naming the file and what is wrong, and exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.conftest import DATA

EXPECTED = yaml.safe_load((DATA / "problems" / "malformed" / "expected.yaml").read_text())
GOOD_CANDIDATE = DATA / "candidates/p01_pointwise_gelu_chain/triton_ok.py"


@pytest.mark.parametrize("entry", EXPECTED, ids=lambda e: e["problem"].split("/")[-1])
def test_malformed_problem(entry):
    problem = DATA / entry["problem"]
    proc = subprocess.run(
        [sys.executable, "-m", "kernelskill.cli", "review", str(problem), str(GOOD_CANDIDATE), "--device", "cpu",
         "--no-timing", "--trials", "1"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = proc.stderr
    assert "Traceback" not in message and "Traceback" not in proc.stdout
    assert problem.name in message
    if "mentions" in entry:
        assert entry["mentions"] in message
    if "line" in entry:
        assert f":{entry['line']}" in message and "syntax error" in message


def test_missing_problem_file(tmp_path):
    from kernelskill.errors import ProblemError
    from kernelskill.problem import read_problem

    with pytest.raises(ProblemError, match="no such problem file"):
        read_problem(tmp_path / "nope.py")
