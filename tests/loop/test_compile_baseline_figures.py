"""What `bench --baseline compile` carries from a review into results.json: the speedup over torch.compile(Model) on
the GPU and at the pace of back-to-back calls; and how scripts/published_vs_ours.py fills the second into a run made
before bench recorded it."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from kernelskill.bench.runner import BenchRequest, run_bench
from kernelskill.loop.settings import LoopSettings
from kernelskill.review.results import TimingStats
from kernelskill.review.paced import host_paced
from kernelskill.settings import ReviewSettings

from .helpers import PROBLEM, AgentScript, FakeEvaluator, kernel

REPO = Path(__file__).resolve().parents[2]
# CUDA-L1's L2/86 on the H200, in ms: torch.compile(Model) 0.016 on the GPU and 0.270 of host time a call
COMPILED_GPU, COMPILED_HOST, CANDIDATE_HOST = 0.016, 0.270, 0.095


class TimesCompile(FakeEvaluator):
    """Reviews as FakeEvaluator does, and times torch.compile(Model) beside the candidate as a GPU review does: faster
    than the kernel on the GPU, slower at the pace its host launches it."""

    def review(self, problem, candidate, settings, log_dir):
        result = super().review(problem, candidate, settings, log_dir)
        assert settings.baseline == "compile"  # --rounds 0: the seed's own review times the compile
        t = result.timing
        compiled = TimingStats.from_samples([COMPILED_GPU] * 5)
        paced, _ = host_paced(COMPILED_GPU, COMPILED_HOST, t.candidate.median_ms, CANDIDATE_HOST)
        timing = t.model_copy(update={
            "compiled_reference": compiled, "speedup_vs_compile": COMPILED_GPU / t.candidate.mean_ms,
            "host_us": {"reference": 150.0, "candidate": CANDIDATE_HOST * 1e3, "compiled_reference": COMPILED_HOST * 1e3},
            "speedup_vs_compile_host_paced": paced})
        return result.model_copy(update={"timing": timing, "compile_ms": COMPILED_GPU,
                                         "speedup_vs_compile": timing.speedup_vs_compile})


def bench(tmp_path: Path):
    folder = tmp_path / "p"
    folder.mkdir()
    shutil.copy(PROBLEM, folder / "1_gelu_chain.py")
    request = BenchRequest(problems=folder, model="script:", out=tmp_path / "run", parallel=1, baseline="compile",
                           loop=LoopSettings(seeds=1, rounds=0, profile="off"), review=ReviewSettings(device="cpu"))
    # the candidate: 0.1 ms on the GPU (10x over the fake's 1 ms reference)
    return run_bench(request, client=AgentScript(generator=[kernel("correct", 10.0, robust=10.0)]),
                     evaluator=TimesCompile())


def test_the_host_paced_speedup_over_torch_compile_reaches_results_json(tmp_path):
    (task,) = bench(tmp_path).tasks
    assert task.speedup_vs_compile == pytest.approx(0.16)
    assert task.speedup_vs_compile_host_paced == pytest.approx(COMPILED_HOST / 0.1)  # its host paces the compile


def test_published_vs_ours_fills_the_figure_from_run_db_as_the_review_computes_it(tmp_path):
    spec = importlib.util.spec_from_file_location("published_vs_ours", REPO / "scripts" / "published_vs_ours.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    bench(tmp_path)
    path = tmp_path / "run" / "results.json"
    results = json.loads(path.read_text())
    recorded = results["tasks"][0].pop("speedup_vs_compile_host_paced")
    path.write_text(json.dumps(results))  # as a run made before bench recorded the figure
    assert script.fill_host_paced(path) == 1
    assert json.loads(path.read_text())["tasks"][0]["speedup_vs_compile_host_paced"] == pytest.approx(recorded)
    assert script.fill_host_paced(path) == 0  # a task that has it is left alone


class CompileFails(FakeEvaluator):
    def review(self, problem, candidate, settings, log_dir):
        result = super().review(problem, candidate, settings, log_dir)
        flag = "compile_baseline_failed: torch.compile(Model) raised InductorError: ..."
        return result.model_copy(update={"flags": [*result.flags, flag]})


def test_a_failed_compile_baseline_is_said_once(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    shutil.copy(PROBLEM, folder / "1_gelu_chain.py")
    request = BenchRequest(problems=folder, model="script:", out=tmp_path / "run", parallel=1, baseline="compile",
                           loop=LoopSettings(seeds=1, rounds=0, profile="off"), review=ReviewSettings(device="cpu"))
    (task,) = run_bench(request, client=AgentScript(generator=[kernel("correct", 2.0)]), evaluator=CompileFails()).tasks
    assert task.speedup_vs_compile is None
    assert [f.split(":")[0] for f in task.flags].count("compile_baseline_failed") == 1
