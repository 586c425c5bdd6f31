"""One way from evidence to advice: on every H200 capture of the decision benchmark, what `memory bench` scores,
what `memory explain` shows and what the optimization loop stores and hands its Planner are the same advice.

The loop is driven through its own decision step (TaskRunner._decide) with the capture as the base kernel's source
and the capture's ncu and profiler evidence as its profile, so nothing of the loop's evidence handling is skipped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from kernelskill.agents.context import ReviewFeedback
from kernelskill.loop.evaluator import Profiled
from kernelskill.loop.runner import TaskRunner
from kernelskill.loop.state import KernelRef
from kernelskill.memory import advise
from kernelskill.memory.tools.bench import advise_kernel, kernel_evidence, load_manifest, run_bench
from kernelskill.memory.tools.cli import memory_app
from memhelpers import NCU_DATA

MANIFEST = NCU_DATA / "h200" / "decision_bench.yaml"


def comparable(advice: dict) -> dict:
    """The advice without what says where its evidence came from (file paths, how an LLM feature went unknown: the
    bench has no LLM, the loop's Feature Extractor gave no answer here)."""
    out = {k: v for k, v in advice.items() if k not in ("code_path", "collection")}
    out["features"] = {name: {k: v for k, v in fv.items() if not (k == "reason" and fv["mode"] == "llm")}
                       for name, fv in advice["features"].items()}  # fmt: skip
    return out


class _Store:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.decisions = run_dir, []

    def add_profile(self, candidate_id, evidence, seconds=None, queue_seconds=None) -> None:
        pass

    def add_decision(self, round_id, candidate_id, decision: dict) -> None:
        self.decisions.append(decision)


class _Profiler:
    def __init__(self, evidence) -> None:
        self.evidence, self.calls = evidence, 0

    def profile(self, problem, candidate, kb, keep) -> Profiled:
        self.calls += 1
        return Profiled(self.evidence.model_copy(update={"code_features": {}}), {})


def loop_advice(kb, evidence, source: str, backend: str, tmp_path: Path) -> tuple[dict, list[str]]:
    """The advice the loop stores for a base kernel of `source` profiled as `evidence`, and the methods whose cards
    it hands the Planner."""
    store, profiler = _Store(tmp_path), _Profiler(evidence)
    task = SimpleNamespace(backend=backend, device="cpu", device_name=None, name="capture")
    ctx = SimpleNamespace(kb=kb, store=store, evaluator=profiler, profiles=True, task=task,
                          problem_path=tmp_path / "problem.py", on_event=lambda event: None)  # fmt: skip
    runner = TaskRunner(ctx)  # type: ignore[arg-type]
    runner.state.llm_features[hashlib.sha256(source.encode()).hexdigest()] = {}  # the extractor answered nothing
    base = KernelRef(candidate_id=1, label="seed-1", path="kernels/capture/seed-1.py", source=source,
                     feedback=ReviewFeedback(correct=True))  # fmt: skip
    brief, cards = runner._decide(1, 1, base, {})
    assert profiler.calls == 1 and len(store.decisions) == 1
    assert brief.allowed_methods == store.decisions[0]["allowed_methods"] == [c.id for c in cards]
    assert [r.method for r in brief.ranked] == [r["method"] for r in store.decisions[0]["ranking"]]
    return store.decisions[0], brief.allowed_methods


@pytest.fixture(scope="module")
def bench_report(kb):
    return {r.id: r for r in run_bench(MANIFEST, kb).kernels}


@pytest.mark.parametrize("kernel", [k["id"] for k in yaml.safe_load(MANIFEST.read_text())["kernels"]])
def test_bench_explain_and_loop_give_the_same_advice(kernel, kb, bench_report, tmp_path):
    advice = advise_kernel(MANIFEST, kernel, kb)
    scored = bench_report[kernel]
    assert (scored.allowed, scored.bottleneck, scored.case, scored.tier) == (
        advice.allowed_methods, advice.bottleneck, advice.case, advice.tier)

    r = CliRunner().invoke(memory_app, ["explain", "--bench", str(MANIFEST), "--id", kernel, "--json"])
    assert r.exit_code == 0, r.output
    shown = json.loads(r.stdout)
    assert shown == advice.model_dump(mode="json")

    manifest = load_manifest(MANIFEST, kb)
    entry = next(k for k in manifest.kernels if k.id == kernel)
    evidence = kernel_evidence(entry, MANIFEST.parent, manifest.gpu, kb)
    backend = entry.backend or advice.backend
    if backend is None:  # plain PyTorch (two captures): the bench advises for no backend, a loop for its task's
        backend, advice = "cuda", advise(kb, evidence, backend="cuda")
    stored, planner = loop_advice(kb, evidence, (MANIFEST.parent / entry.code).read_text(), backend, tmp_path)
    assert planner == advice.allowed_methods
    assert comparable(stored) == comparable(advice.model_dump(mode="json"))


def test_the_captures_cover_both_backends_and_a_vetoed_method(kb):
    # what the equality above is worth: the captures exercise backends, ranked gains and vetoes, not one easy path
    advices = [advise_kernel(MANIFEST, k.id, kb) for k in load_manifest(MANIFEST, kb).kernels]
    assert {a.backend for a in advices} >= {"cuda", "triton"}
    assert any(a.vetoed for a in advices) and any(r.gain is not None for a in advices for r in a.ranking)


def test_a_task_backend_vetoes_what_the_candidates_own_would_allow(kb, tmp_path):
    # a CUDA base in a Triton task (kept under --rules kernelbench): the advice is for Triton, and the trace names
    # each method it vetoed for that backend
    manifest = load_manifest(MANIFEST, kb)
    entry = next(k for k in manifest.kernels if k.id == "serial_softmax_cuda")
    evidence = kernel_evidence(entry, MANIFEST.parent, manifest.gpu, kb)
    own, triton = advise(kb, evidence), advise(kb, evidence, backend="triton")
    assert own.backend == "cuda" and triton.backend == "triton"
    dropped = set(own.allowed_methods) - set(triton.allowed_methods)
    assert "warp_level_reduction" in dropped and all(not kb.method(m).cues.applicable("triton") for m in dropped)
    assert {v.method for v in triton.vetoed if v.rule == "not_applicable_to_triton"} == dropped
    source = (MANIFEST.parent / entry.code).read_text()
    stored, planner = loop_advice(kb, evidence, source, "triton", tmp_path)
    assert planner == triton.allowed_methods and stored["backend"] == "triton"


def test_no_case_left_opens_every_method_not_forbidden(kb):
    # the fallback is the advice's, so the bench scores and explain shows what the Planner would get
    evidence = kernel_evidence(next(k for k in load_manifest(MANIFEST, kb).kernels if k.id == "naive_gemm"),
                               MANIFEST.parent, "NVIDIA H200", kb)  # fmt: skip
    empty = kb.__class__(**{**kb.__dict__, "decision_table": []})
    advice = advise(empty, evidence, backend="triton")
    assert advice.case is None and advice.fallback and advice.ranking == []
    assert advice.allowed_methods == [m.id for m in kb.methods
                                      if m.id not in advice.forbidden and m.cues.applicable("triton")]  # fmt: skip
