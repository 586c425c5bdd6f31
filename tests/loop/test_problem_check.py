"""A problem that cannot run is refused before any model is asked (optimize and bench), and never left running."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelskill.bench.runner import BenchRequest, run_bench
from kernelskill.errors import ProblemError
from kernelskill.loop.optimize import OptimizeRequest, optimize
from kernelskill.loop.settings import LoopSettings
from kernelskill.problem import read_problem
from kernelskill.review.probe import check_problem
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore

from .helpers import PROBLEM, AgentScript, FakeEvaluator, kernel

RAISES = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    raise ValueError("the input file is missing")


def get_init_inputs():
    return []
'''


def bad_problem(folder):
    folder.mkdir(exist_ok=True)
    path = folder / "2_raises.py"
    path.write_text(RAISES)
    return path


def test_optimize_refuses_a_problem_whose_get_inputs_raises_before_any_llm_call(tmp_path):
    client = AgentScript()  # any call would be recorded, and fail: nothing is scripted
    request = OptimizeRequest(problem=bad_problem(tmp_path / "p"), model="script:", out=tmp_path / "run",
                              loop=LoopSettings(seeds=1, rounds=1, profile="off"), review=ReviewSettings(device="cpu"))
    with pytest.raises(ProblemError, match=r"2_raises.py:\d+: `get_inputs\(\)` raised ValueError: the input file"):
        optimize(request, client=client, evaluator=FakeEvaluator())
    assert client.calls == []
    assert not (tmp_path / "run").exists()  # no run folder, so no task left `running` in any store


def test_bench_fails_only_that_task_and_asks_nothing_for_it(tmp_path):
    folder = tmp_path / "p"
    bad_problem(folder)
    (folder / "1_gelu_chain.py").write_text(PROBLEM.read_text())
    client = AgentScript(generator=[kernel("correct", 1.0)])
    results = run_bench(BenchRequest(problems=folder, model="script:", out=tmp_path / "run", parallel=1,
                                     loop=LoopSettings(seeds=1, rounds=0, profile="off"),
                                     review=ReviewSettings(device="cpu")), client=client, evaluator=FakeEvaluator())
    tasks = {t.name: t for t in results.tasks}
    assert tasks["2_raises"].status == "failed" and "get_inputs()` raised ValueError" in tasks["2_raises"].reason
    assert tasks["1_gelu_chain"].success and len(client.calls) == 1  # the good task's seed only
    with RunStore.open(tmp_path / "run") as store:
        assert {t.name: t.status for t in store.tasks(store.latest_run().id)} == {
            "1_gelu_chain": "finished", "2_raises": "failed"}


def test_check_runs_on_the_meta_device_and_falls_back_to_the_cpu(tmp_path):
    # huge inputs cost nothing on the meta device; `.item()` needs real values, so that problem runs on the CPU
    huge = RAISES.replace('raise ValueError("the input file is missing")', "return [torch.randn(1 << 20, 1 << 20)]")
    needs_values = RAISES.replace('raise ValueError("the input file is missing")',
                                  "n = int(torch.tensor(3).item())\n    return [torch.randn(n)]")
    for i, source in enumerate((huge, needs_values)):
        path = tmp_path / f"{i}_ok.py"
        path.write_text(source)
        check_problem(read_problem(path))
    broken_init = RAISES.replace("def forward", "def __init__(self, n):\n        super().__init__()\n\n    def forward")
    path = tmp_path / "3_init.py"
    path.write_text(broken_init.replace('raise ValueError("the input file is missing")', "return [torch.randn(2)]"))
    with pytest.raises(ProblemError, match=r"`Model\(\*get_init_inputs\(\)\)` raised TypeError"):
        check_problem(read_problem(path))


@pytest.mark.slow
def test_cli_exits_2_with_the_problems_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kernelskill.cli", "optimize", str(bad_problem(tmp_path)),
                           "--model", "openai/m", "--base-url", "http://127.0.0.1:9/v1", "--device", "cpu",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "raised ValueError: the input file is missing" in lines[0]
