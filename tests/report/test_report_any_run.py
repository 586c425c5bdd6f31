"""`kernelskill report` takes an optimize run folder too, writes elsewhere with --out, and reads a run folder it
cannot write without a traceback."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelskill.cli import app
from kernelskill.errors import KernelSkillError
from kernelskill.loop.optimize import OptimizeRequest, optimize
from kernelskill.loop.settings import LoopSettings
from kernelskill.report import write_report
from kernelskill.report.build import run_results
from kernelskill.settings import ReviewSettings
from tests.loop.helpers import PROBLEM, AgentScript, FakeEvaluator, kernel


@pytest.fixture
def optimize_run(tmp_path) -> Path:
    out = tmp_path / "opt"
    request = OptimizeRequest(problem=PROBLEM, model="script:", out=out,
                              loop=LoopSettings(seeds=2, rounds=0, profile="off", parallel_seeds=False),
                              review=ReviewSettings(device="cpu"))
    optimize(request, client=AgentScript(generator=[kernel("mismatch"), kernel("correct", 1.5)]),
             evaluator=FakeEvaluator())
    return out


def test_an_optimize_run_is_reported_as_one_task(optimize_run):
    # before: "holds no results.json: point kernelskill report at the folder a kernelskill bench --out run wrote"
    results = run_results(optimize_run)
    assert results.run["kind"] == "optimize" and [t.name for t in results.tasks] == ["gelu_chain"]
    assert results.tasks[0].success and results.tasks[0].best_speedup == pytest.approx(1.5)
    paths = write_report(optimize_run)
    html = (optimize_run / "report.html").read_text()
    assert "KernelSkill optimize run" in html and "gelu_chain" in html
    assert "seed-2" in html  # the optimization tree came from run.db
    assert {p.name for p in paths} == {"report.html", "summary.md", "tasks.csv"}


def test_a_read_only_run_folder_is_reported_with_out(optimize_run, tmp_path, monkeypatch):
    """A read-only mount, simulated: the folder reports itself unwritable and every write into it fails. (The test
    may run as root, whom permission bits do not stop.)"""
    import kernelskill.report.build as build

    real_access, real_write = os.access, build.write_atomically
    inside = optimize_run.resolve()

    def access(path, mode, *a, **k):
        return False if Path(path).resolve() == inside and mode & os.W_OK else real_access(path, mode, *a, **k)

    def write(path, text):
        if Path(path).resolve().parent == inside:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_write(path, text)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(build, "write_atomically", write)
    before = sorted(p.name for p in optimize_run.iterdir())
    with pytest.raises(KernelSkillError, match="cannot write the report into .*pass --out FOLDER"):
        write_report(optimize_run)
    r = CliRunner().invoke(app, ["report", str(optimize_run)])
    assert r.exit_code != 0 and isinstance(r.exception, KernelSkillError)  # main() prints it as one line, exit 2
    paths = write_report(optimize_run, out=tmp_path / "elsewhere")
    assert all(p.parent == tmp_path / "elsewhere" for p in paths)
    assert "seed-2" in (tmp_path / "elsewhere" / "report.html").read_text()  # run.db was read, immutably
    assert sorted(p.name for p in optimize_run.iterdir()) == before  # nothing written into the run folder


def test_a_folder_without_results_says_what_to_point_at(tmp_path):
    with pytest.raises(KernelSkillError, match="bench --out` or `kernelskill optimize --out"):
        run_results(tmp_path)
