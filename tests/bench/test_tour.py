"""The README's key-free tour: `corpus import` of the shipped kernels, `bench` over the shipped problems with
`--model corpus:`, then `report`. No model, no key; the reviews are real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.bench.discover import discover

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "examples" / "tour"


def kernelskill(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run([sys.executable, "-m", "kernelskill.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def test_every_shipped_problem_has_a_shipped_kernel():
    problems = {t.name for t in discover(TOUR)}
    kernels = {p.stem for p in (TOUR / "kernels" / "level1").glob("*.py")}
    assert problems == kernels == {"1_gelu_chain", "2_relu", "3_row_softmax"}


@pytest.mark.slow
def test_the_tour_runs_bench_and_report_without_a_model(tmp_path):
    corpus, run = tmp_path / "corpus", tmp_path / "tour"
    r = kernelskill("corpus", "import", "examples/tour/kernels", "--names-from", "examples/tour", "--out", str(corpus))
    assert r.returncode == 0, r.stderr
    r = kernelskill("bench", "--problems", "examples/tour", "--model", f"corpus:{corpus}", "--seeds", "1",
                    "--rounds", "0", "--device", "cpu", "--iters", "3", "--warmup", "1", "--trials", "2",
                    "--out", str(run))
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads((run / "results.json").read_text())
    verdicts = {t["name"]: (t["success"], t["verdict"]) for t in results["tasks"]}
    # two correct kernels, and one wrong on purpose whose console line says why
    assert verdicts == {"1_gelu_chain": (True, "correct"), "2_relu": (True, "correct"),
                        "3_row_softmax": (False, "mismatch")}
    assert "3_row_softmax: no correct kernel (last: trial" in r.stdout
    r = kernelskill("report", str(run))
    assert r.returncode == 0, r.stderr
    html = (run / "report.html").read_text()
    assert "KernelSkill benchmark" in html and "3_row_softmax" in html
