"""Gather the evidence for one decision from files, or (later) by profiling a candidate on the GPU."""

from __future__ import annotations

from pathlib import Path

from kernelskill.errors import KernelSkillError
from kernelskill.memory.codeview import read_source
from kernelskill.memory.evidence import Evidence, load_profiler_summary
from kernelskill.memory.features import FeatureJudge, extract_features, unknown_features
from kernelskill.memory.knowledge import KnowledgeBase
from kernelskill.memory.ncu import load_ncu_csv


def collect_evidence(
    kb: KnowledgeBase,
    metrics: Path | None = None,
    code: Path | None = None,
    run_features: Path | None = None,
    judge: FeatureJudge | None = None,
) -> Evidence:
    """Evidence from an `ncu --csv --page raw` file, a candidate source and a profiler-summary JSON (each optional)."""
    if metrics is None and code is None and run_features is None:
        raise KernelSkillError(
            "no evidence given: pass --metrics NCU.csv, --code CANDIDATE.py and/or --run-features JSON"
        )
    ev = Evidence()
    if metrics is not None:
        ev.ncu = load_ncu_csv(metrics)
        ev.ncu_status = "ok"
    if run_features is not None:
        ev.profiler = load_profiler_summary(run_features)
    if code is not None:
        ev.code_path = str(code)
        ev.code_features = extract_features(kb.code_features, read_source(code), judge)
    else:
        ev.code_features = unknown_features(kb.code_features, "no candidate source given (--code)")
    return ev


def profile_candidate(problem: Path, candidate: Path) -> Evidence:
    """Profile `candidate` against `problem` on the GPU (ncu + PyTorch profiler) and return the evidence.

    The profiling itself belongs to the Reviewer (a spawned worker with its own CUDA context and time limits);
    this is the boundary it plugs into.
    """
    for path in (problem, candidate):
        if not Path(path).is_file():
            raise KernelSkillError(f"{path}: no such file")
    raise KernelSkillError(
        "explain --problem/--candidate needs the reviewer's profiler, which is not wired in yet; capture metrics "
        "with `ncu --csv --page raw --set full --clock-control none ...` and run "
        "`kernelskill memory explain --metrics NCU.csv --code CANDIDATE.py` instead"
    )
