"""The decision benchmark: does the policy give the advice an expert would give, on real captured kernels?

A manifest (YAML) lists kernels, each with its evidence - an `ncu --set full --page raw --csv` capture, the
candidate's source, optionally PyTorch-profiler run features and the problem's minimum work - and expert labels:
the methods an expert would try first on it, with why. `run_bench` decides on each and scores:

- allowed: share of kernels where at least one expert method is among the allowed methods;
- top-1:   share where the first-ranked method is an expert method;
- empty:   kernels on which the decision table left no method (no case matched, or every method vetoed).

Each kernel is scored on the advice the Planner would be shown (`kernelskill.memory.advise`), not on the table's
raw allowed set: when the table leaves nothing, the advice opens every method not forbidden, and that is scored
(and the kernel listed under `empty`).

Paths in the manifest are relative to the manifest's folder. Format:

    gpu: NVIDIA H200                 # default GPU for the floors (a kernel may name its own)
    kernels:
      - id: naive_gemm
        kind: classic                # classic | llm (a real LLM-written kernel)
        metrics: naive_gemm.csv      # ncu raw CSV (optional: decide on code and run features alone)
        code: naive_gemm.py          # the candidate's source (optional)
        run_features: x.json         # PyTorch-profiler summary (optional)
        problem: {flops: 2.1e9, bytes: 1.3e7, precision: tf32}   # (output_bytes optional) or problem_file: P.py
        forward_ms: 0.39             # measured time of one forward (optional)
        backend: triton              # the task's backend (optional; default: the candidate's own)
        expert: [shared_memory_tiling, tensor_cores]
        why: an untiled 1024^3 GEMM at 1 % of its floor ...
        source: where the kernel comes from
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelskill.errors import KernelSkillError
from kernelskill.memory.knowledge import KnowledgeBase
from kernelskill.memory.policy.advise import advise
from kernelskill.memory.policy.collect import collect_evidence, with_problem
from kernelskill.memory.policy.evidence import Evidence
from kernelskill.memory.policy.trace import Advice
from kernelskill.review.roofline import PRECISIONS
from kernelskill.review.work import ProblemWork


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProblemSpec(_Strict):
    flops: float = Field(ge=0)
    bytes: float = Field(ge=0)
    output_bytes: float | None = Field(default=None, ge=0)  # the outputs alone (review/work.py's output_bytes)
    precision: str


class BenchKernel(_Strict):
    id: str
    kind: Literal["classic", "llm"]
    metrics: str | None = None
    code: str | None = None
    run_features: str | None = None
    problem: ProblemSpec | None = None
    problem_file: str | None = None
    gpu: str | None = None
    forward_ms: float | None = Field(default=None, gt=0)
    backend: Literal["cuda", "triton"] | None = None  # the task's backend; default: the candidate's own
    expert: list[str] = Field(min_length=1)
    why: str = Field(min_length=10)
    source: str = ""


class BenchManifest(_Strict):
    gpu: str | None = None
    description: str = ""
    kernels: list[BenchKernel] = Field(min_length=1)


class KernelResult(BaseModel):
    id: str
    kind: str
    bottleneck: str
    case: str | None
    tier: str | None
    pct_of_floor: float | None
    allowed: list[str]
    expert: list[str]
    allowed_hit: bool
    top1_hit: bool
    first_expert_rank: int | None  # rank of the best-ranked expert method among the allowed (1 = first)
    fallback: bool = False  # the decision table left no method: the fallback's open set was scored


class BenchReport(BaseModel):
    manifest: str
    kernels: list[KernelResult]
    allowed_accuracy: float
    top1_accuracy: float
    empty: list[str]  # kernels on which the decision table left no method (the advice fell back to all not forbidden)
    by_kind: dict[str, dict[str, float]]


def load_manifest(path: str | Path, kb: KnowledgeBase) -> BenchManifest:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KernelSkillError(f"{p}: cannot read the bench manifest: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise KernelSkillError(f"{p}: not valid YAML: {exc}") from None
    try:
        manifest = BenchManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise KernelSkillError(f"{p}: {where}: {first['msg']}") from None
    problems = []
    ids = [k.id for k in manifest.kernels]
    problems += [f"kernel id {i!r} appears twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    methods = {m.id for m in kb.methods}
    for k in manifest.kernels:
        problems += [f"{k.id}: expert method {m!r} is not in the knowledge base" for m in k.expert if m not in methods]
        if k.problem is not None and k.problem.precision not in PRECISIONS:
            problems.append(f"{k.id}: precision {k.problem.precision!r} is not one of {', '.join(PRECISIONS)}")
        if k.problem is not None and k.problem_file is not None:
            problems.append(f"{k.id}: give problem or problem_file, not both")
        if k.metrics is None and k.code is None and k.run_features is None:
            problems.append(f"{k.id}: no evidence (metrics, code or run_features)")
        for name in ("metrics", "code", "run_features", "problem_file"):
            rel = getattr(k, name)
            if rel is not None and not (p.parent / rel).is_file():
                problems.append(f"{k.id}: {name} file {rel} does not exist (paths are relative to the manifest)")
    if problems:
        raise KernelSkillError(f"{p}: invalid bench manifest:\n  " + "\n  ".join(problems))
    return manifest


def kernel_evidence(k: BenchKernel, root: Path, default_gpu: str | None, kb: KnowledgeBase) -> Evidence:
    """The evidence of one benchmark kernel: its captured files, and the problem's work from the manifest (or counted
    from its problem file) with the GPU and the forward time that place the kernel against the floor."""
    ev = collect_evidence(kb, metrics=root / k.metrics if k.metrics else None, code=root / k.code if k.code else None,
                          run_features=root / k.run_features if k.run_features else None)  # fmt: skip
    gpu = k.gpu or default_gpu
    if k.problem is not None:
        ev.problem = ProblemWork(source="manifest", flops=k.problem.flops, bytes=k.problem.bytes,
                                 output_bytes=k.problem.output_bytes, precision=k.problem.precision, gpu=gpu,
                                 forward_ms=k.forward_ms)  # fmt: skip
    elif k.problem_file is not None:
        ev = with_problem(ev, root / k.problem_file, gpu, k.forward_ms)
    elif gpu is not None or k.forward_ms is not None:
        ev.problem = ProblemWork(source="manifest", gpu=gpu, forward_ms=k.forward_ms,
                                 note="the problem's work is not given")
    return ev


def advise_kernel(path: str | Path, kernel_id: str, kb: KnowledgeBase) -> Advice:
    """The advice on one kernel of a manifest, as run_bench scores it (`memory explain --bench M --id K` shows it)."""
    p = Path(path)
    manifest = load_manifest(p, kb)
    k = next((k for k in manifest.kernels if k.id == kernel_id), None)
    if k is None:
        ids = ", ".join(k.id for k in manifest.kernels[:12]) + (", ..." if len(manifest.kernels) > 12 else "")
        raise KernelSkillError(f"{p}: no kernel {kernel_id!r} (kernels: {ids})")
    return advise(kb, kernel_evidence(k, p.parent, manifest.gpu, kb), backend=k.backend)


def run_bench(path: str | Path, kb: KnowledgeBase) -> BenchReport:
    p = Path(path)
    manifest = load_manifest(p, kb)
    results = []
    for k in manifest.kernels:
        a = advise(kb, kernel_evidence(k, p.parent, manifest.gpu, kb), backend=k.backend)
        pct = next((x.value for x in a.derived if x.id == "pct_of_floor" and x.state == "value"), None)
        ranks = [i for i, m in enumerate(a.allowed_methods, start=1) if m in k.expert]
        results.append(KernelResult(
            id=k.id, kind=k.kind, bottleneck=a.bottleneck, case=a.case, tier=a.tier, pct_of_floor=pct,
            allowed=a.allowed_methods, expert=k.expert, allowed_hit=bool(ranks), top1_hit=ranks[:1] == [1],
            first_expert_rank=ranks[0] if ranks else None, fallback=a.fallback is not None,
        ))  # fmt: skip
    by_kind = {}
    for kind in sorted({r.kind for r in results}):
        rs = [r for r in results if r.kind == kind]
        by_kind[kind] = {"kernels": len(rs), "allowed": _share(rs, "allowed_hit"), "top1": _share(rs, "top1_hit")}
    return BenchReport(manifest=str(p), kernels=results, allowed_accuracy=_share(results, "allowed_hit"),
                       top1_accuracy=_share(results, "top1_hit"), empty=[r.id for r in results if r.fallback],
                       by_kind=by_kind)  # fmt: skip


def _share(results: list[KernelResult], attr: str) -> float:
    return sum(1 for r in results if getattr(r, attr)) / len(results) if results else 0.0
