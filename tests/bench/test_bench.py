"""`kernelskill bench` end to end on CPU: the real CLI and `openai` client against a local scripted server, real
reviews (Triton interpreter); a task whose kernel crashes its worker, a malformed problem file, a run killed and
resumed, and results.json checked against metrics recomputed from its own tasks."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelskill.llm.local_server import ScriptedServer

from kernelskill.bench.scripted_team import ScriptedTeam, TaskScript, read

pytestmark = pytest.mark.slow
DATA = Path(__file__).resolve().parents[1] / "data"
KEY = "sk-test-bench-77e1c0ffee-secret"


def problems(tmp_path: Path) -> tuple[Path, ScriptedTeam]:
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(DATA / "problems" / "p01_pointwise_gelu_chain.py", folder / "1_gelu_chain.py")
    shutil.copy(DATA / "problems" / "p02_row_softmax.py", folder / "2_row_softmax.py")
    shutil.copy(DATA / "problems" / "p13_scaled_leaky_relu.py", folder / "3_scaled_leaky_relu.py")
    (folder / "4_malformed.py").write_text("import torch\n\n# no Model, no get_inputs\n")
    cand = DATA / "candidates"
    team = ScriptedTeam({
        "1_gelu_chain": TaskScript(seed=read(cand / "p01_pointwise_gelu_chain" / "triton_ok.py")),
        # the seed kills its worker (SIGABRT); the repair is correct
        "2_row_softmax": TaskScript(seed=read(cand / "broken" / "crash.py"),
                                    repaired=read(cand / "p02_row_softmax" / "triton_ok.py")),
        "3_scaled_leaky_relu": TaskScript(seed=read(cand / "p13_scaled_leaky_relu" / "triton_ok.py")),
    })
    return folder, team


def bench(folder: Path, out: Path, server: ScriptedServer, *extra, wait=True, env_extra: dict | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["OPENAI_API_KEY"] = KEY
    env.update(env_extra or {})
    cmd = [sys.executable, "-m", "kernelskill.cli", "bench", "--problems", str(folder), "--model", "openai/scripted",
           "--base-url", server.openai_url, "--device", "cpu", "--seeds", "1", "--rounds", "1", "--trials", "2",
           "--warmup", "1", "--iters", "3", "--parallel", "2", "--out", str(out), *extra]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


def recompute(tasks: list[dict]) -> dict:
    """The paper's metrics, computed independently of kernelskill.report."""
    n = len(tasks)
    ok = [t["best_speedup"] for t in tasks if t["success"]]
    return {
        "tasks": n,
        "success": len(ok) / n,
        "speedup_mean": statistics.fmean(ok) if ok else None,
        "speedup_mean_all": statistics.fmean(ok + [1.0] * (n - len(ok))),
        "speedup_geomean": math.exp(statistics.fmean(math.log(s) for s in ok)) if ok else None,
        "speedup_median": statistics.median(ok) if ok else None,
        "fast_1": sum(s >= 1 for s in ok) / n,
        "fast_p": {p: sum(s >= float(p) for s in ok) / n for p in ("0.5", "0.8", "1.5", "2")},
    }


def test_bench_runs_tasks_concurrently_and_isolates_failures(server, tmp_path):
    folder, team = problems(tmp_path)
    server.responder = team
    out = tmp_path / "run"
    r = bench(folder, out, server)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    tasks = {t["name"]: t for t in results["tasks"]}
    assert list(tasks) == ["1_gelu_chain", "2_row_softmax", "3_scaled_leaky_relu", "4_malformed"]  # by prefix
    assert tasks["4_malformed"]["status"] == "failed" and "4_malformed.py" in tasks["4_malformed"]["reason"]
    crashed = tasks["2_row_softmax"]
    assert crashed["success"] and [h["verdict"] for h in crashed["history"]] == ["crash", "correct"]
    assert crashed["verdict"] == "correct" and tasks["4_malformed"]["verdict"] is None
    stages = tasks["1_gelu_chain"]["stage_seconds"]  # where the seconds went: 2 reviews (seed, round 1)
    assert {"queue", "load", "compile", "verify", "time", "review_wall"} <= set(stages)
    assert stages["review_wall"] >= stages["compile"] + stages["verify"] + stages["time"] > 0
    assert [h["branch"] for h in crashed["history"]] == ["seed", "repair"]
    for name in ("1_gelu_chain", "3_scaled_leaky_relu"):
        assert tasks[name]["success"] and tasks[name]["status"] == "finished"
        assert (out / tasks[name]["best_path"]).read_text() == team.tasks[name].seed
        # the best kernel's own review beside the task's speedup: its median and spread, and a noise verdict
        assert tasks[name]["best_speedup_median"] > 0 and tasks[name]["best_spread"] >= 0
        assert (tasks[name]["timing_noisy"] is not None) == any(f.startswith("noisy_timing")
                                                                for f in tasks[name]["flags"])
    expected = recompute(results["tasks"])
    overall = results["overall"]
    for key, value in expected.items():
        if isinstance(value, float):
            assert overall[key] == pytest.approx(value, rel=1e-12), key
        elif isinstance(value, dict):
            assert overall[key] == pytest.approx(value, rel=1e-12), key
        else:
            assert overall[key] == value, key
    assert overall["tokens"] == sum(t["tokens"] for t in results["tasks"]) > 0
    assert set(results["levels"]) == {"mine"}  # a plain folder is one level named after it
    assert KEY not in (out / "results.json").read_text()


def test_bench_killed_then_resumed_skips_finished_tasks(server, tmp_path):
    folder, team = problems(tmp_path)
    (folder / "4_malformed.py").unlink()
    team.hang = {"3_scaled_leaky_relu"}  # its Planner hangs: the run is killed while it waits
    server.responder = team
    out = tmp_path / "run"
    proc = bench(folder, out, server, "--parallel", "3", wait=False)
    deadline = time.monotonic() + 600
    done = set()
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "results.json").exists():
            tasks = json.loads((out / "results.json").read_text())["tasks"]
            done = {t["name"] for t in tasks if t["status"] == "finished"}
            if {"1_gelu_chain", "2_row_softmax"} <= done and ("planner", "3_scaled_leaky_relu") in team.calls:
                break
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    assert {"1_gelu_chain", "2_row_softmax"} <= done
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    team.hang = set()
    before = len(team.calls)
    r = bench(folder, out, server, "--resume")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    resumed_calls = team.calls[before:]
    # finished tasks are not asked again (the Feature Extractor's prompt names no task: it sees only code)
    assert {task for agent, task in resumed_calls if agent != "feature_extractor"} == {"3_scaled_leaky_relu"}
    assert ("generator", "3_scaled_leaky_relu") not in resumed_calls  # its seed round had finished
    results = json.loads((out / "results.json").read_text())
    assert all(t["status"] == "finished" and t["success"] for t in results["tasks"])
    assert results["overall"]["success"] == 1.0
