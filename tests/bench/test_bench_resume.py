"""A bench resume spends only what the run was started to spend: `bench --out DIR --resume` continues with the run's
own problems, tasks, model, rounds, budgets and review settings; a flag may only raise the rounds or a budget; and
the command printed on Ctrl-C is exactly the one that continues the run."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kernelskill.bench.runner import BenchEvent, BenchRequest, run_bench
from kernelskill.errors import KernelSkillError
from kernelskill.llm.accounting import Budget
from kernelskill.loop.settings import LoopSettings
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore

from ..loop.helpers import PROBLEM, AgentScript, FakeEvaluator, features, kernel, plan

ROOT = Path(__file__).resolve().parents[2]


class Recording(FakeEvaluator):
    """Records the review settings every review ran with."""

    def __init__(self) -> None:
        super().__init__()
        self.settings: list[ReviewSettings] = []

    def review(self, problem, candidate, settings, log_dir):
        self.settings.append(settings)
        return super().review(problem, candidate, settings, log_dir)


def folder_of_two(path: Path) -> Path:
    path.mkdir()
    shutil.copy(PROBLEM, path / "1_gelu_chain.py")
    shutil.copy(PROBLEM, path / "2_gelu_chain_again.py")
    return path


def one_round() -> dict:
    return dict(feature_extractor=[features()], planner=[plan("kernel_fusion")], optimizer=[kernel("correct", 1.6)])


def stop_after_first_round(stop: threading.Event):
    seen: list[BenchEvent] = []

    def on_event(e: BenchEvent) -> None:
        if e.kind == "round":
            seen.append(e)
            if len(seen) == 2:  # the seeds' line, then round 1's: the run ends there, the task stays resumable
                stop.set()
    return on_event


def start_two_rounds(tmp_path: Path, **budget) -> Path:
    """Task 1 of a folder of two (--tasks 1), 2 rounds, 2 trials; stopped after round 1, as Ctrl-C stops it."""
    out = tmp_path / "run"
    request = BenchRequest(problems=folder_of_two(tmp_path / "p"), indices={1}, model="script:", out=out, parallel=1,
                           loop=LoopSettings(seeds=1, rounds=2, profile="off"),
                           review=ReviewSettings(device="cpu", trials=2), budget=Budget(**budget))
    stop = threading.Event()
    client = AgentScript(generator=[kernel("correct", 1.0)], **one_round())
    first = run_bench(request, client=client, evaluator=FakeEvaluator(), stop=stop,
                      on_event=stop_after_first_round(stop))
    assert [(t.name, t.status) for t in first.tasks] == [("1_gelu_chain", "running")] and not client.unused()
    return out


def test_a_resume_given_only_its_folder_continues_with_the_runs_own_settings(tmp_path):
    out = start_two_rounds(tmp_path)
    client, evaluator = AgentScript(**one_round()), Recording()
    # before: BenchRequest needed --problems and --model, and the defaults (15 rounds, 5 trials, every task in the
    # folder) were refused as changes; now the run's own apply
    results = run_bench(BenchRequest(out=out, resume=True), client=client, evaluator=evaluator)
    assert [t.name for t in results.tasks] == ["1_gelu_chain"]  # --tasks 1 kept: task 2 is not started
    task = results.tasks[0]
    assert task.status == "finished" and task.success and task.reason is None, task.reason
    assert len(task.history) == 3 and not client.unused()  # the seed and 2 rounds: one round asked for, no more
    assert [s.trials for s in evaluator.settings] == [2]
    assert results.run["rounds"] == 2 and results.run["model"] == "script:"


def test_more_rounds_may_be_asked_for_and_stay_the_runs(tmp_path):
    out = start_two_rounds(tmp_path)
    more = BenchRequest(out=out, resume=True, loop=LoopSettings(rounds=3))
    client = AgentScript(feature_extractor=[features()], planner=[plan("kernel_fusion"), plan("cuda_graphs")],
                         optimizer=[kernel("correct", 1.6), kernel("correct", 1.7)])
    task = run_bench(more, client=client, evaluator=FakeEvaluator()).tasks[0]
    assert task.status == "finished" and len(task.history) == 4 and not client.unused()
    with RunStore.open(out) as store:
        config = store.latest_run().config
    assert config["rounds"] == 3 and config["loop"]["rounds"] == 3  # the next resume keeps the raised count
    with pytest.raises(KernelSkillError, match="--rounds: 3 when the run started, 2 now"):
        run_bench(BenchRequest(out=out, resume=True, loop=LoopSettings(rounds=2)), client=AgentScript(),
                  evaluator=FakeEvaluator())


def test_other_settings_and_a_smaller_budget_are_refused_by_name(tmp_path):
    out = start_two_rounds(tmp_path, max_tokens=100_000)
    for asked, said in ((dict(budget=Budget(max_tokens=1000)), "--max-tokens-per-task: 100000 when the run started, "
                         "1000 now"),
                        (dict(model="script:other"), "--model: script: when the run started, script:other now"),
                        (dict(indices={1, 2}), "--tasks: 1 when the run started, 1,2 now"),
                        (dict(review=ReviewSettings(trials=3)), "--trials: 2 when the run started, 3 now")):
        with pytest.raises(KernelSkillError, match=said):
            run_bench(BenchRequest(out=out, resume=True, **asked), client=AgentScript(), evaluator=FakeEvaluator())


def test_a_token_budget_holds_across_a_resume_that_does_not_repeat_it(tmp_path):
    # each call spends 150 tokens (helpers.AgentScript): the seed and round 1 spend 600, over the budget of 500
    out = start_two_rounds(tmp_path, max_tokens=500)
    client = AgentScript()
    task = run_bench(BenchRequest(out=out, resume=True), client=client, evaluator=FakeEvaluator()).tasks[0]
    # before: the resume was refused for leaving --max-tokens-per-task out; without a budget it would ask for round 2
    assert task.status == "finished" and "token budget" in (task.reason or ""), task.reason
    assert task.tokens == 600 and client.calls == []


def test_a_resume_without_a_run_names_what_is_missing(tmp_path):
    with pytest.raises(KernelSkillError, match="nothing to resume"):
        run_bench(BenchRequest(out=tmp_path / "nothing", resume=True), client=AgentScript(),
                  evaluator=FakeEvaluator())
    with pytest.raises(KernelSkillError, match="bench needs --problems DIR"):
        run_bench(BenchRequest(model="script:", out=tmp_path / "new"), client=AgentScript(),
                  evaluator=FakeEvaluator())


@pytest.mark.slow
def test_the_command_printed_on_ctrl_c_continues_the_run_with_its_own_settings(tmp_path):
    """The README's key-free tour, interrupted with SIGINT once its first task is done; the printed command is run
    as printed (only `kernelskill` spelled as this interpreter's module) and finishes the other tasks with the run's
    own --rounds 0, --trials 2 and corpus model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["PYTHONPATH"] = str(ROOT / "src")

    def kernelskill(*args: str, wait: bool = True):
        cmd = [sys.executable, "-m", "kernelskill.cli", *args]
        if wait:
            return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    corpus, out = tmp_path / "corpus", tmp_path / "tour"
    r = kernelskill("corpus", "import", "examples/tour/kernels", "--names-from", "examples/tour", "--out", str(corpus))
    assert r.returncode == 0, r.stderr
    proc = kernelskill("bench", "--problems", "examples/tour", "--model", f"corpus:{corpus}", "--seeds", "1",
                       "--rounds", "0", "--device", "cpu", "--iters", "3", "--warmup", "1", "--trials", "2",
                       "--parallel", "1", "--out", str(out), wait=False)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "results.json").exists():
            tasks = json.loads((out / "results.json").read_text())["tasks"]
            if any(t["status"] == "finished" for t in tasks):
                break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]
    printed = stderr.split("Continue with: ", 1)[1].strip().splitlines()[0]
    assert printed == shlex.join(["kernelskill", "bench", "--out", str(out), "--resume", "--parallel", "1"])
    r = kernelskill(*shlex.split(printed)[1:])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "the device waited " in r.stdout and " s on builds not yet finished (gpu_wait)" in r.stdout  # issue 33
    results = json.loads((out / "results.json").read_text())
    assert {t["name"]: (t["status"], t["success"]) for t in results["tasks"]} == {
        "1_gelu_chain": ("finished", True), "2_relu": ("finished", True), "3_row_softmax": ("finished", False)}, (
        [(t["name"], t["reason"], t["history"]) for t in results["tasks"]], stderr[-2000:], r.stdout[-2000:])
    assert all(len(t["history"]) == 1 for t in results["tasks"])  # --rounds 0: the seed alone
    assert results["run"]["review"]["trials"] == 2 and results["run"]["model"] == f"corpus:{corpus}"
