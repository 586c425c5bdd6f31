"""A resume spends only what the run was started to spend: its own rounds, budgets and model, unless a flag asks for
more; and the command printed on Ctrl-C is exactly the one that continues the run."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelskill.errors import KernelSkillError
from kernelskill.llm.accounting import Budget
from kernelskill.loop.optimize import OptimizeRequest, continue_command, optimize
from kernelskill.loop.settings import LoopSettings
from kernelskill.settings import ReviewSettings
from kernelskill.store import RunStore

from .helpers import PROBLEM, AgentScript, FakeEvaluator, features, kernel, plan

ROOT = Path(__file__).resolve().parents[2]


def started(out: Path, **loop) -> OptimizeRequest:
    """A fresh run as the command line builds it: only the options given are set."""
    return OptimizeRequest(problem=PROBLEM, model="script:", out=out,
                           loop=LoopSettings(**{"seeds": 1, "profile": "off", "parallel_seeds": False, **loop}),
                           review=ReviewSettings(device="cpu"))


def resumed(out: Path, **given) -> OptimizeRequest:
    """`kernelskill optimize PROBLEM --out DIR --resume` with only the options in `given`."""
    return OptimizeRequest(problem=PROBLEM, out=out, resume=True, **given)


def test_a_resume_without_rounds_keeps_the_runs_own_rounds_and_asks_nothing(tmp_path):
    out = tmp_path / "run"
    s = optimize(started(out, rounds=1), client=AgentScript(generator=[kernel("correct", 1.0)],
                                                            feature_extractor=[features()], planner=[plan("kernel_fusion")],
                                                            optimizer=[kernel("correct", 1.2)]),
                 evaluator=FakeEvaluator())
    assert s.rounds == 1 and s.rounds_run == 1
    # before: the resume ran on to the default 15 rounds, asking the model for 14 more
    again = optimize(resumed(out), client=AgentScript(), evaluator=FakeEvaluator())
    assert again.rounds == 1 and again.rounds_run == 1 and again.model == "script:"


def test_more_rounds_must_be_asked_for_and_then_stay_the_runs(tmp_path):
    out = tmp_path / "run"
    optimize(started(out, rounds=0), client=AgentScript(generator=[kernel("correct", 1.0)]),
             evaluator=FakeEvaluator())
    more = optimize(resumed(out, loop=LoopSettings(rounds=1)),
                    client=AgentScript(feature_extractor=[features()], planner=[plan("kernel_fusion")], optimizer=[kernel("correct", 1.2)]),
                    evaluator=FakeEvaluator())
    assert more.rounds == 1 and more.rounds_run == 1
    # the next plain resume keeps the raised count, and asks nothing more
    assert optimize(resumed(out), client=AgentScript(), evaluator=FakeEvaluator()).rounds == 1
    with pytest.raises(KernelSkillError, match="--rounds: 1 when the run started, 0 now"):
        optimize(resumed(out, loop=LoopSettings(rounds=0)), client=AgentScript(), evaluator=FakeEvaluator())


def test_a_token_budget_holds_across_a_resume_that_does_not_repeat_it(tmp_path):
    out = tmp_path / "run"
    request = started(out, rounds=5).model_copy(update={"budget": Budget(max_tokens=200)})
    s = optimize(request, client=AgentScript(generator=[kernel("mismatch")], diagnoser=["not json"] * 4),
                 evaluator=FakeEvaluator())
    assert s.ended and "token budget" in s.ended
    spent = s.tokens
    assert spent >= 200
    # before: the resume was refused for leaving --max-tokens-per-task out, or (given other options) spent anew
    again = optimize(resumed(out), client=AgentScript(), evaluator=FakeEvaluator())
    assert again.tokens == spent and "token budget" in (again.ended or "")
    with RunStore.open(out) as store:
        assert store.latest_run().config["budget"]["max_tokens"] == 200


def test_a_smaller_budget_or_other_settings_are_refused_on_resume(tmp_path):
    out = tmp_path / "run"
    request = started(out, rounds=0).model_copy(update={"budget": Budget(max_tokens=2000)})
    optimize(request, client=AgentScript(generator=[kernel("correct", 1.0)]), evaluator=FakeEvaluator())
    with pytest.raises(KernelSkillError, match="--max-tokens-per-task: 2000 when the run started, 1000 now"):
        optimize(resumed(out, budget=Budget(max_tokens=1000)), client=AgentScript(), evaluator=FakeEvaluator())
    with pytest.raises(KernelSkillError, match="--model: script: when the run started, other: now"):
        optimize(resumed(out, model="other:"), client=AgentScript(), evaluator=FakeEvaluator())
    assert optimize(resumed(out, budget=Budget(max_tokens=3000)), client=AgentScript(),
                    evaluator=FakeEvaluator()).success


def test_a_run_whose_url_held_credentials_asks_for_it_again(tmp_path):
    out = tmp_path / "run"
    request = started(out, rounds=0).model_copy(update={"base_url": "http://user:pw@127.0.0.1:9/v1"})
    optimize(request, client=AgentScript(generator=[kernel("correct", 1.0)]), evaluator=FakeEvaluator())
    with pytest.raises(KernelSkillError, match="add --base-url"):
        optimize(resumed(out), client=AgentScript(), evaluator=FakeEvaluator())


def test_the_continue_command_quotes_what_a_shell_would_split():
    assert continue_command("my problems/p.py", "runs/a b") == \
        "kernelskill optimize 'my problems/p.py' --out 'runs/a b' --resume"


@pytest.mark.slow
def test_the_command_printed_on_ctrl_c_continues_the_run_with_its_own_settings(tmp_path):
    """The README's example, interrupted after its first round with SIGINT; the printed command is then run as
    printed (only `kernelskill` spelled as this interpreter's module) and finishes the run's 3 rounds, not 15."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "kernelskill.cli", "optimize", "examples/gelu_chain.py", "--model",
           "replay:examples/gelu_chain.transcript.jsonl", "--rounds", "3", "--profile", "off", "--device", "cpu",
           "--trials", "2", "--iters", "3", "--warmup", "1", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    for line in proc.stdout:  # the first round's line: the seeds are done, round 1 is recorded
        if line.strip().startswith("round 1") or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    printed = stderr.split("Continue with: ", 1)[1].strip().splitlines()[0]
    args = shlex.split(printed)
    assert args[0] == "kernelskill"
    r = subprocess.run([sys.executable, "-m", "kernelskill.cli", *args[1:]], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"] == 3 and summary["rounds_run"] == 3 and summary["success"]
    assert summary["model"] == "replay:examples/gelu_chain.transcript.jsonl"
