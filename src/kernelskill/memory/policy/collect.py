"""Gather the evidence for one decision: from files already captured, or by profiling a candidate on the GPU."""

from __future__ import annotations

from pathlib import Path

from kernelskill.errors import KernelSkillError
from kernelskill.memory.features.codeview import read_source
from kernelskill.memory.features.extract import FeatureJudge, extract_features, unknown_features
from kernelskill.memory.knowledge import KnowledgeBase
from kernelskill.memory.policy.evidence import Evidence
from kernelskill.memory.policy.load import load_knowledge
from kernelskill.profiling.ncu import load_ncu_csv
from kernelskill.profiling.run import ProfileSettings, run_profile
from kernelskill.profiling.summary import load_profiler_summary


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


def profile_candidate(
    problem: Path,
    candidate: Path,
    kb: KnowledgeBase | None = None,
    settings: ProfileSettings | None = None,
    judge: FeatureJudge | None = None,
) -> Evidence:
    """Profile `candidate` against `problem` on the GPU (ncu + PyTorch profiler) and return the evidence.

    See profiling.py: a driver program runs warm-up forwards, then ncu (`--set full --clock-control none`) records
    one forward, and a plain run records the PyTorch profiler's kernels per forward. Code features come from the
    candidate's source. A missing, forbidden, timed-out or failed ncu is stated in the evidence (ncu_status and
    ncu_note) and the policy decides on what remains; only unreadable input files raise.
    """
    kb = kb if kb is not None else load_knowledge()
    view = read_source(candidate)  # fails early, with a clear message, on an unreadable candidate
    run = run_profile(Path(problem), Path(candidate), settings)
    collection = list(run.log)
    if run.workdir is not None:
        collection.append(f"driver, logs, ncu report and CSV kept in {run.workdir}")
    return Evidence(
        ncu=run.ncu_report, ncu_status=run.ncu_status, ncu_note=run.ncu_note, profiler=run.profiler,
        profiler_note=run.profiler_note, code_path=str(candidate),
        code_features=extract_features(kb.code_features, view, judge), collection=collection,
    )  # fmt: skip


def with_problem(
    evidence: Evidence, problem: Path, gpu: str | None = None, forward_ms: float | None = None
) -> Evidence:
    """The evidence with the problem's minimum work (counted once per problem in this process), and the GPU and the
    candidate's forward time that place it against the problem's floor (None: the ncu report's GPU, the measured
    time of the profile). A problem file that cannot be read is an error that names it."""
    from kernelskill.problem import read_problem
    from kernelskill.review.sol import problem_work

    work = problem_work(read_problem(problem))
    return evidence.model_copy(update={"problem": work.model_copy(update={"gpu": gpu, "forward_ms": forward_ms})})
