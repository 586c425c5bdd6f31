"""`kernelskill optimize` end to end: the real CLI, the real `openai` client talking to a local HTTP server that
speaks the chat-completions protocol, and the real Reviewer running Triton kernels in the interpreter on CPU."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelskill.store import RunStore

from kernelskill.llm.local_server import ScriptedServer, error, openai_ok
from .helpers import PROBLEM, diagnosis, features, plan

pytestmark = pytest.mark.slow
KERNELS = Path(__file__).resolve().parents[1] / "data" / "loop"
KEY = "sk-test-loop-4b1e9d07c3a2-secret"
# the same tests run on a GPU host with KERNELSKILL_TEST_DEVICE=cuda (scripts/gpu_optimize_check.py does)
DEVICE = os.environ.get("KERNELSKILL_TEST_DEVICE", "cpu")


def keep(run_dir: Path, name: str) -> None:
    """With KERNELSKILL_TEST_OUT set (the GPU check), keep a run's summary and history for the record."""
    dest = os.environ.get("KERNELSKILL_TEST_OUT")
    if dest:
        Path(dest).mkdir(parents=True, exist_ok=True)
        (Path(dest) / f"{name}.summary.json").write_text((run_dir / "summary.json").read_text())


def code(name: str, words: str = "Here is the kernel.") -> str:
    return f"{words}\n\n```python\n{(KERNELS / f'{name}.py').read_text()}```\n"


def ok(text: str):
    return openai_ok(text, prompt_tokens=100, completion_tokens=50)  # 150 tokens a call


def cli(*args, server: ScriptedServer, wait=True, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["OPENAI_API_KEY"] = KEY
    cmd = [sys.executable, "-m", "kernelskill.cli", "optimize", str(PROBLEM), "--model", "openai/test-model",
           "--base-url", server.openai_url, "--device", DEVICE, "--trials", "2", "--warmup", "1", "--iters", "3",
           # the scripted Planner's methods are those the code-only decision allows (on a GPU, ncu's metrics
           # would allow others); profiling is covered by scripts/gpu_optimize_check.py's example run
           "--profile", "off", *map(str, args)]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, **kw)


def test_full_loop_against_a_local_openai_compatible_server(server, tmp_path):
    out = tmp_path / "run"
    server.add(
        # seeds, asked concurrently: one compiles, the other does not
        ok(code("slow", "A first, simple kernel.")),
        ok(code("syntax", "A second kernel.")),
        # round 1, optimize the slow seed: features, a malformed plan then a good one, a fast but wrong kernel
        ok(features()),
        ok("I think fusing would help, but I will not write JSON."),
        ok(plan("kernel_fusion")),
        ok(code("mismatch")),
        # round 2, repair (wrong output): diagnosis, a fix that does not compile
        ok(diagnosis("GELU constant is 0.6")),
        ok(code("syntax")),
        # round 3, repair (compile error): rate-limited once, then the diagnosis; the fix is correct and fast
        error(429, "slow down", headers={"retry-after": "0"}),
        ok(diagnosis("unbalanced parenthesis")),
        ok(code("fast")),
        # round 4, optimize the new base: features, plan, a slower kernel (correct, not promoted)
        ok(features()),
        ok(plan("cuda_graphs")),
        ok(code("slower")),
        # round 5: the token budget (13 answered calls x 150 tokens = 1950) is spent before any call is sent
    )
    r = cli("--seeds", "2", "--rounds", "6", "--out", out, "--max-tokens-per-task", "1950", "--json",
            server=server)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout)
    assert server.overruns == 0 and not server.script
    assert summary["success"] and summary["best_path"] == str(out / "best.py")
    assert summary["rounds_run"] == 5 and "token budget" in summary["ended"]
    assert summary["llm_calls"] == 13 and summary["tokens"] == 13 * 150  # the 429 was retried inside its call
    assert (out / "best.py").read_text() == (KERNELS / "fast.py").read_text()
    keep(out, "full_loop")

    with RunStore.open(out) as store:
        run = store.latest_run()
        task = store.tasks(run.id)[0]
        rounds = store.rounds(task.id)
        assert [(r.idx, r.branch, r.status) for r in rounds] == [
            (0, "seed", "done"), (1, "optimize", "done"), (2, "repair", "done"), (3, "repair", "done"),
            (4, "optimize", "done"), (5, "optimize", "failed")]
        outcomes = [r.outcome for r in rounds[1:5]]
        assert [o["verdict"] for o in outcomes] == ["mismatch", "compile_error", "correct", "correct"]
        assert outcomes[2]["promoted"] == "best+base" and outcomes[2]["method"] == "kernel_fusion"
        assert outcomes[3]["promoted"] is None  # slower than the base: neither best nor base
        cands = {c.label: c for c in store.candidates(task.id)}
        assert set(cands) == {"seed-1", "seed-2", "round-01", "round-02", "round-03", "round-04"}
        assert sorted(str(store.review_of(cands[s].id).error_kind) for s in ("seed-1", "seed-2")) == [
            "None", "compile_error"]
        assert all((out / c.path).read_text() == c.source for c in cands.values())
        assert len(store.decisions(task.id)) == 3  # rounds 1, 4 and 5 (whose Planner call the budget refused)
        calls = store.llm_calls(task_id=task.id)
        assert [c.agent for c in calls if c.reply is not None].count("planner") == 3
        assert all(KEY not in json.dumps(c.messages) + (c.reply or "") + (c.error or "") for c in calls)
    # the Diagnoser of round 3 saw the whole chain, the Planner's re-ask quoted the problem
    requests = [json.dumps(req.body) for req in server.requests]
    assert "GELU constant is 0.6" in requests[9] and "Repair history" in requests[9]  # 8 was the 429
    assert "could not be used" in requests[4]
    # no key anywhere in the run folder
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path

    # replay reproduces the run without any server: same kernels, same verdicts
    replay_out = tmp_path / "replay"
    r2 = subprocess.run(
        [sys.executable, "-m", "kernelskill.cli", "optimize", str(PROBLEM), "--model",
         f"replay:{out / 'transcript.jsonl'}", "--device", DEVICE, "--trials", "2", "--warmup", "1", "--iters", "3",
         "--seeds", "2", "--rounds", "4", "--profile", "off",
         "--out", replay_out, "--json"], capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI")},
    )
    assert r2.returncode == 0, r2.stderr[-3000:]
    replayed = json.loads(r2.stdout)
    keep(replay_out, "full_loop_replayed")
    assert replayed["best_speedup"] is not None and replayed["rounds_run"] == 4
    with RunStore.open(replay_out) as store:
        task = store.tasks(store.latest_run().id)[0]
        again = [(r.idx, r.branch, (r.outcome or {}).get("verdict")) for r in store.rounds(task.id)]
    assert again == [(0, "seed", None)] + [(o["round"], o["branch"], o["verdict"]) for o in outcomes], replayed
    assert (replay_out / "best.py").read_text() == (KERNELS / "fast.py").read_text(), replayed


def test_auth_error_stops_at_once_naming_the_variable(server, tmp_path):
    server.add(error(401, "Incorrect API key provided", echo_key=True))
    r = cli("--seeds", "1", "--rounds", "1", "--out", tmp_path / "run", server=server)
    assert r.returncode == 7, r.stderr[-2000:]
    assert "OPENAI_API_KEY" in r.stderr and KEY not in r.stderr + r.stdout
    assert len(server.requests) == 1  # never retried


def test_no_model_says_how_to_configure_one(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kernelskill.cli", "optimize", str(PROBLEM)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 7
    assert "OPENAI_API_KEY" in r.stderr and "--base-url" in r.stderr and "replay:" in r.stderr


def test_killed_mid_run_then_resumed(server, tmp_path):
    out = tmp_path / "run"
    server.add(
        ok(code("slow")),  # seed
        ok(features()), ok(plan("kernel_fusion")), ok(code("fast")),  # round 1: promoted
    )
    server.add(ok(features()))  # round 2 starts ...
    from kernelskill.llm.local_server import Reply

    slow_plan = ok(plan("cuda_graphs"))
    server.add(Reply(status=slow_plan.status, body=slow_plan.body, delay_s=60))  # ... and hangs in the Planner
    proc = cli("--seeds", "1", "--rounds", "3", "--out", out, server=server, wait=False, start_new_session=True)
    deadline = time.monotonic() + 300
    while len(server.requests) < 6 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert len(server.requests) == 6, proc.communicate()[1][-3000:] if proc.poll() is not None else "timed out"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    db = sqlite3.connect(out / "run.db")
    assert db.execute("select idx, status from rounds order by id").fetchall() == [(0, "done"), (1, "done"),
                                                                                  (2, "running")]
    db.close()
    server.script.clear()
    server.add(ok(features()), ok(plan("cuda_graphs")), ok(code("slower")),  # round 2, asked again from the start
               ok(plan("kernel_fusion", what_differs="a larger block")), ok(code("slower")))  # round 3
    r = cli("--seeds", "1", "--rounds", "3", "--out", out, "--resume", "--json", server=server)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout)
    keep(out, "killed_and_resumed")
    assert summary["rounds_run"] == 3 and summary["success"]
    assert server.overruns == 0 and not server.script
    with RunStore.open(out) as store:
        task = store.tasks(store.latest_run().id)[0]
        assert [(r.idx, r.status) for r in store.rounds(task.id)] == [
            (0, "done"), (1, "done"), (2, "abandoned"), (2, "done"), (3, "done")]
    assert (out / "best.py").read_text() == (KERNELS / "fast.py").read_text()
