"""A run folder has one writer at a time, and a resume may not change what the run measures (optimize and bench)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.bench.runner import BenchRequest, run_bench
from kernelskill.errors import KernelSkillError
from kernelskill.loop.optimize import OptimizeRequest, optimize
from kernelskill.loop.settings import LoopSettings
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore
from kernelskill.store.lock import hold_run_folder

from .helpers import EXAMPLES, PROBLEM, AgentScript, FakeEvaluator, kernel

SRC = Path(__file__).resolve().parents[2] / "src"


def optimize_request(out: Path, **loop) -> OptimizeRequest:
    return OptimizeRequest(problem=PROBLEM, model="script:", out=out, resume=True,
                           loop=LoopSettings(**{"seeds": 1, "rounds": 0, "profile": "off", "parallel_seeds": False, **loop}),
                           review=ReviewSettings(device="cpu"))


def bench_request(problems: Path, out: Path, *, resume=False, rounds=0, model="script:", seeds=1) -> BenchRequest:
    return BenchRequest(problems=problems, model=model, out=out, resume=resume, parallel=1,
                        loop=LoopSettings(seeds=seeds, rounds=rounds, profile="off"), review=ReviewSettings(device="cpu"))


def problem_folder(path: Path) -> Path:
    path.mkdir()
    shutil.copy(PROBLEM, path / "1_gelu_chain.py")
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run([sys.executable, "-m", "kernelskill.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300)


# ---- one writer ---------------------------------------------------------------------------------------------------

def test_a_second_writer_is_refused_and_told_the_holders_pid(tmp_path):
    out = tmp_path / "run"
    with hold_run_folder(out, create=True, command="optimize"):
        with pytest.raises(KernelSkillError, match=rf"in use by process {os.getpid()} \(kernelskill optimize\)"):
            optimize(optimize_request(out), client=AgentScript(), evaluator=FakeEvaluator())
        with pytest.raises(KernelSkillError, match=rf"in use by process {os.getpid()}"):
            run_bench(bench_request(problem_folder(tmp_path / "p"), out, resume=True), client=AgentScript(),
                      evaluator=FakeEvaluator())
    # released with the holder: the folder is writable again
    s = optimize(optimize_request(out).model_copy(update={"resume": False}),
                 client=AgentScript(generator=[kernel("correct", 1.0)]), evaluator=FakeEvaluator())
    assert s.success


@pytest.mark.slow
def test_cli_second_resume_exits_2_with_one_line_naming_the_pid(tmp_path):
    out = tmp_path / "run"
    folder = problem_folder(tmp_path / "p")
    with hold_run_folder(out, create=True, command="bench"):
        optimize_run = cli("optimize", str(PROBLEM), "--model", f"replay:{EXAMPLES / 'gelu_chain.transcript.jsonl'}",
                           "--device", "cpu", "--out", str(out), "--resume")
        bench_run = cli("bench", "--problems", str(folder), "--model", "openai/m", "--base-url",
                        "http://127.0.0.1:9/v1", "--device", "cpu", "--out", str(out), "--resume")
    for r in (optimize_run, bench_run):
        assert r.returncode == 2, r.stderr[-2000:]
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"in use by process {os.getpid()}" in lines[0], r.stderr
        assert "Traceback" not in r.stderr


# ---- what a resume may change -------------------------------------------------------------------------------------

def test_bench_resume_refuses_other_problems_seeds_or_model_and_names_each(tmp_path):
    folder, out = problem_folder(tmp_path / "p"), tmp_path / "run"
    run_bench(bench_request(folder, out), client=AgentScript(generator=[kernel("correct", 1.0)]),
              evaluator=FakeEvaluator())
    other = problem_folder(tmp_path / "q")
    with pytest.raises(KernelSkillError) as info:
        run_bench(bench_request(other, out, resume=True), client=AgentScript(), evaluator=FakeEvaluator())
    message = str(info.value)
    assert f"--problems: {folder} when the run started, {other} now" in message and "--out" in message
    with pytest.raises(KernelSkillError) as info:
        run_bench(bench_request(folder, out, resume=True, seeds=2, model="script:other"), client=AgentScript(),
                  evaluator=FakeEvaluator())
    message = str(info.value)
    assert "--seeds: 1 when the run started, 2 now" in message
    assert "--model: script: when the run started, script:other now" in message
    # the same settings (the folder named another way) resume: the finished task is skipped, nothing is asked
    results = run_bench(bench_request(tmp_path / "p" / ".." / "p", out, resume=True), client=AgentScript(),
                        evaluator=FakeEvaluator())
    assert results.overall.tasks == 1 and results.overall.success == 1.0
    with RunStore.open(out) as store:
        assert len(store.tasks(store.latest_run().id)) == 1


def test_optimize_resume_allows_more_rounds_but_not_other_settings(tmp_path):
    out = tmp_path / "run"
    request = optimize_request(out).model_copy(update={"resume": False})
    optimize(request, client=AgentScript(generator=[kernel("correct", 1.0)]), evaluator=FakeEvaluator())
    with pytest.raises(KernelSkillError, match="--seeds: 1 when the run started, 2 now"):
        optimize(optimize_request(out, seeds=2), client=AgentScript(), evaluator=FakeEvaluator())
    changed = optimize_request(out).model_copy(update={"review": ReviewSettings(device="cpu", trials=2)})
    with pytest.raises(KernelSkillError, match="--trials: 5 when the run started, 2 now"):
        optimize(changed, client=AgentScript(), evaluator=FakeEvaluator())
    s = optimize(optimize_request(out), client=AgentScript(), evaluator=FakeEvaluator())
    assert s.rounds_run == 0 and s.success


def test_differences_ignore_provenance_and_allow_only_the_listed_raises():
    from kernelskill.store.resume import differences

    started = {"loop": {"rounds": 3, "seeds": 1}, "kernelskill": "0.1", "gpus": ["0"], "problems": "a"}
    assert differences(started, {**started, "kernelskill": "0.2", "gpus": ["1"]}) == []
    more = {**started, "loop": {"rounds": 5, "seeds": 1}}
    assert differences(started, more, may_raise=frozenset({"loop.rounds"})) == []
    assert differences(more, started, may_raise=frozenset({"loop.rounds"})) == [
        "--rounds: 5 when the run started, 3 now"]


def test_a_run_started_before_the_sandbox_settings_existed_resumes_but_not_with_other_review_settings():
    # a run folder brought from an older version (no review.sandbox in its config) resumes under confinement: the
    # sandbox guards the host and changes no figure; a nested review setting that does change figures still differs
    from kernelskill.store.resume import differences

    started = {"review": {"atol": 0.01, "iters": 100}}
    now = {"review": {"atol": 0.01, "iters": 100, "sandbox": {"network": True, "filesystem": True}}}
    assert differences(started, now) == []
    assert differences(started, {"review": {**now["review"], "iters": 50}}) == [
        "--iters: 100 when the run started, 50 now"]


def test_a_resume_interrupted_in_the_compile_warm_up_keeps_its_finished_tasks_in_results_json(tmp_path):
    """On the H200 a level-3 resume was cut short while Inductor's cache warmed, before the task loop reached the
    three tasks finished by the call before: results.json listed all 42 as pending (the run's store still had them)."""
    import json
    import threading

    folder, out = problem_folder(tmp_path / "p"), tmp_path / "run"
    shutil.copy(PROBLEM, folder / "2_gelu_chain_again.py")
    request = bench_request(folder, out).model_copy(update={"baseline": "compile"})
    stop = threading.Event()

    class StopAfterOne(FakeEvaluator):
        def warm_compile(self, problem, settings, log_dir):
            return None  # nothing warmed: the reviews compile for themselves

        def review(self, *args, **kwargs):
            stop.set()  # the run stops after the task in flight: the second one stays pending
            return super().review(*args, **kwargs)

    first = run_bench(request, client=AgentScript(generator=[kernel("correct", 1.0)] * 2),
                      evaluator=StopAfterOne(), stop=stop)
    assert [t.status for t in first.tasks] == ["finished", "pending"]

    class InterruptedWhileWarming(FakeEvaluator):
        def warm_compile(self, problem, settings, log_dir):
            raise KeyboardInterrupt  # the budget's Ctrl-C, while the pending task warms

    with pytest.raises(KeyboardInterrupt):
        run_bench(request.model_copy(update={"resume": True}), client=AgentScript(),
                  evaluator=InterruptedWhileWarming())
    tasks = json.loads((out / "results.json").read_text())["tasks"]
    assert [(t["name"], t["status"]) for t in tasks] == [("1_gelu_chain", "finished"),
                                                         ("2_gelu_chain_again", "pending")]
    assert tasks[0]["success"]
