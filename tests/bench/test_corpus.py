"""Published kernels as seeds: `kernelskill corpus import`, the `corpus:` model, and `bench` over a corpus, on CPU.

The corpus here is written in CUDA-L1's released format (JSON Lines: level_id, task_id, ref_code, custom_code) from
this repository's own problems and Triton candidates, so the whole path runs in Triton's interpreter; the real
CUDA-L1 file is reviewed on the GPU by scripts/corpus_bench.py (docs/h200/kernelbench/).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.llm.base import Message
from kernelskill.llm.corpus import CorpusClient, CorpusMiss

DATA = Path(__file__).resolve().parents[1] / "data"


def _record(level, task, problem, kernel, prefix="", **meta):
    return {"level_id": level, "task_id": task, "ref_code": (DATA / problem).read_text(),
            "custom_code": prefix + (DATA / kernel).read_text() if kernel else "", **meta}


PYTORCH_ONLY = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.sum(dim=self.dim) / x.shape[self.dim]
"""


@pytest.fixture
def corpus(tmp_path) -> Path:
    source = tmp_path / "published.json"
    rows = [
        _record(1, 1, "problems/p01_pointwise_gelu_chain.py", "candidates/p01_pointwise_gelu_chain/triton_ok.py",
                score_default=1.5),
        # a global backend switch, as CUDA-L1's kernels have: KernelBench accepts it, strict does not
        _record(1, 2, "problems/p13_scaled_leaky_relu.py", "candidates/p13_scaled_leaky_relu/triton_ok.py",
                prefix="import torch\ntorch.backends.cudnn.benchmark = True\n"),
        _record(1, 3, "problems/p02_row_softmax.py", None),  # published without a kernel
        # plain PyTorch, as many published "kernels" are: not the task's backend, correct under kernelbench only
        {**_record(1, 4, "problems/p07_mean_dim.py", None), "custom_code": PYTORCH_ONLY},
        {**_record(1, 5, "problems/p15_l2_normalize_rows.py", None), "custom_code": "None"},  # CUDA-L1's "no kernel"
    ]
    source.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "corpus"
    proc = subprocess.run([sys.executable, "-m", "kernelskill.cli", "corpus", "import", str(source), "--out", str(out),
                           "--label", "test records"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "level 1: 5 tasks, 3 with a kernel, 5 with a reference" in proc.stdout
    return out


def test_the_client_serves_the_kernel_of_the_task_in_the_prompt(corpus):
    client = CorpusClient(corpus)
    reference = (corpus / "problems" / "level1" / "1_task.py").read_text()
    reply = client.complete([Message(role="user", content=f"Problem `whatever`\n```python\n{reference}   \n```")],
                            agent="generator")
    assert "class ModelNew" in reply.text and "_gelu_chain_kernel" in reply.text  # matched by the reference
    by_name = client.complete([Message(role="user", content="Problem `2_task`; backend: Triton")], agent="generator")
    assert "cudnn.benchmark" in by_name.text
    with pytest.raises(CorpusMiss, match="no kernel for 3_task"):
        client.complete([Message(role="user", content="Problem `3_task`")], agent="generator")
    with pytest.raises(CorpusMiss, match="seeds only"):
        client.complete([Message(role="user", content="Problem `1_task`")], agent="planner")
    with pytest.raises(CorpusMiss, match="no task named"):
        client.complete([Message(role="user", content="Problem `99_other`")], agent="generator")


def test_bench_over_a_corpus_gives_both_verdicts_and_names_what_is_missing(corpus, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "kernelskill.cli", "bench", "--problems", str(corpus / "problems"), "--model",
           f"corpus:{corpus}", "--device", "cpu", "--seeds", "1", "--rounds", "0", "--trials", "2", "--warmup", "1",
           "--iters", "2", "--rules", "kernelbench", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((out / "results.json").read_text())
    tasks = {t["name"]: t for t in results["tasks"]}
    assert tasks["1_task"]["success"] and tasks["1_task"]["success_strict"]
    assert tasks["2_task"]["success"] and tasks["2_task"]["success_kernelbench"]
    assert tasks["2_task"]["success_strict"] is False  # the backend switch: correct, but not under strict
    assert "static:backend-flags" in tasks["2_task"]["flags"]
    assert not tasks["3_task"]["success"] and "no kernel for 3_task" in (tasks["3_task"]["reason"] or "")
    assert tasks["4_task"]["success_kernelbench"] and tasks["4_task"]["success_strict"] is False
    assert "policy:no-custom-kernel" in tasks["4_task"]["flags"]
    assert not tasks["5_task"]["success"] and "no kernel for 5_task" in (tasks["5_task"]["reason"] or "")
    overall = results["overall"]
    assert overall["success_kernelbench"] == pytest.approx(3 / 5) and overall["success_strict"] == pytest.approx(1 / 5)


@pytest.mark.slow
def test_the_compile_baseline_is_warmed_for_every_task_before_anything_is_timed(corpus, tmp_path,
                                                                                fresh_inductor_cache):
    """bench --baseline compile compiles each task's torch.compile(Model) into Inductor's cache first, several at a
    time, and each baseline review then loads its graphs instead of compiling them while it holds the device."""
    import sqlite3

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "kernelskill.cli", "bench", "--problems", str(corpus / "problems"), "--model",
           f"corpus:{corpus}", "--device", "cpu", "--seeds", "1", "--rounds", "0", "--trials", "2", "--warmup", "1",
           "--iters", "2", "--rules", "kernelbench", "--tasks", "1,2", "--baseline", "compile", "--warm-jobs", "2",
           "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    # the sandbox's Inductor cache is this test's own (fresh_inductor_cache): its graphs are cold, only the warm-up
    # can fill it; the kernels other tests compiled from the same code are in it (no g++ run for them again)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    warmed = [i for i, line in enumerate(lines) if "compiled in" in line and "graph" in line]
    assert len(warmed) == 2, proc.stdout
    results_at = [i for i, line in enumerate(lines) if line.startswith(("1_task:", "2_task:")) and "correct" in line]
    assert len(results_at) == 2 and max(warmed) < min(results_at), proc.stdout  # all warm-ups before any verdict
    tasks = {t["name"]: t for t in json.loads((out / "results.json").read_text())["tasks"]}
    assert tasks["1_task"]["speedup_vs_compile"] and tasks["2_task"]["speedup_vs_compile"]
    assert "x vs torch.compile" in lines[results_at[0]]  # the task's line says it too
    db = sqlite3.connect(out / "run.db")
    rows = [json.loads(r[0]) for r in db.execute("select result_json from reviews")]
    assert len(rows) == 2  # with --rounds 0 each seed's own review timed torch.compile: no second review
    for r in rows:
        assert r["timing"]["compile_warmup"]["fxgraph_cache_hit"] >= 1, r["timing"]["compile_warmup"]
        assert r["timing"]["compile_warmup"]["fxgraph_cache_miss"] == 0


def test_published_figures_are_set_beside_ours_and_no_task_is_dropped(tmp_path):
    """scripts/published_vs_ours.py: every corpus task is listed, with both figures and their ratio or with why one
    is missing (no kernel published, our verdict, no --baseline compile)."""
    import importlib.util

    from kernelskill.llm.corpus import CorpusIndex

    spec = importlib.util.spec_from_file_location("published_vs_ours",
                                                  DATA.parents[1] / "scripts" / "published_vs_ours.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    corpus = CorpusIndex.model_validate({"source": "test", "entries": [
        {"level": "1", "index": 1, "name": "1_a", "kernel": "k", "meta": {"score_default": 2.0,
                                                                        "score_torch_compile_default": 1.5}},
        {"level": "1", "index": 2, "name": "2_b", "kernel": "k", "meta": {"score_default": 3.0}},
        {"level": "1", "index": 3, "name": "3_c", "kernel": None, "meta": {}},
        {"level": "2", "index": 1, "name": "1_d", "kernel": "k", "meta": {"score_default": 1.2}},
    ]})
    results = {"tasks": [
        {"level": "1", "index": 1, "success": True, "best_speedup": 1.0, "speedup_vs_compile": 1.5, "verdict": "correct"},
        {"level": "1", "index": 2, "success": False, "best_speedup": None, "verdict": "mismatch"},
        {"level": "1", "index": 3, "success": False, "verdict": "no_candidate"},
    ]}
    table = script.rows(results, corpus)
    assert [r["task"] for r in table] == ["L1/1_a", "L1/2_b", "L1/3_c", "L2/1_d"]  # every corpus task, in order
    assert table[0]["ratio_eager"] == 0.5 and table[0]["ratio_compile"] == 1.0
    assert script.why_missing(table[1], "eager") == "ours: mismatch"
    assert script.why_missing(table[2], "eager") == "no published figure"
    assert script.why_missing(table[3], "eager") == "ours: not in the run"
    text = script.render(table, "results.json", corpus)
    assert "| 1 | 3 | 1 | 0.50 | 0.50 | 0% |" in text and "| L1/2_b | - | 3 |" in text

    # runs over parts of the corpus (one per level) join; a later run's task replaces an earlier one's
    first, second = tmp_path / "l1.json", tmp_path / "l2.json"
    first.write_text(json.dumps(results))
    second.write_text(json.dumps({"tasks": [
        {"level": "2", "index": 1, "success": True, "best_speedup": 1.2, "verdict": "correct"},
        {"level": "1", "index": 2, "success": True, "best_speedup": 3.0, "verdict": "correct"}]}))
    joined = script.rows(script.merged([first, second]), corpus)
    assert [r["ratio_eager"] for r in joined] == [0.5, 1.0, None, 1.0]


def test_a_pending_task_of_a_later_run_does_not_replace_a_finished_one_and_sizes_are_tabled(tmp_path):
    """A level finished by a run over part of it: its first run's results.json lists the other tasks as pending."""
    import importlib.util

    from kernelskill.llm.corpus import CorpusIndex

    spec = importlib.util.spec_from_file_location("published_vs_ours",
                                                  DATA.parents[1] / "scripts" / "published_vs_ours.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    done = {"level": "2", "index": 1, "status": "finished", "success": True, "best_speedup": 1.2, "verdict": "correct",
            "compile_ms": 0.016, "speedup_vs_compile": 0.72, "speedup_vs_compile_host_paced": 2.84}
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"tasks": [done, {"level": "2", "index": 2, "status": "pending"}]}))
    second.write_text(json.dumps({"tasks": [{"level": "2", "index": 1, "status": "pending"},
                                            {**done, "index": 2, "compile_ms": 0.8, "speedup_vs_compile": 1.0,
                                             "speedup_vs_compile_host_paced": 1.0}]}))
    assert [t["status"] for t in script.merged([first, second])["tasks"]] == ["finished", "finished"]
    corpus = CorpusIndex.model_validate({"source": "test", "entries": [
        {"level": "2", "index": i, "name": f"{i}_x", "kernel": "k",
         "meta": {"score_default": 1.2, "score_torch_compile_default": 2.0}} for i in (1, 2)]})
    table = script.rows(script.merged([first, second]), corpus)
    assert script.by_size(table) == ["| 2 | under 50 us | 1 | 0.36 (1) | 1.42 (1) | 1.00 (1) |",
                                     "| 2 | over 500 us | 1 | 0.50 (1) | 0.50 (1) | 1.00 (1) |"]
