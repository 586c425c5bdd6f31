"""What the agents see of a review and of a decision: the Reviewer's and the policy's own words, condensed."""

from __future__ import annotations

import re

from kernelskill.agents.context import DecisionBrief, RankedMethodBrief, ReviewFeedback
from kernelskill.memory.policy.trace import Advice
from kernelskill.review.render import failure_reason
from kernelskill.review.results import ReviewResult
from kernelskill.loop.outcome import verdict

# The log tail is the last resort for a crash or timeout whose message says little; compiler errors and mismatch
# summaries are already in `error`.
_LOG_LINES = 40
_CAVEAT_CHARS = 400
# Flags about the judge's own measurement, not the kernel: nothing a kernel's author can act on (they stay in the
# review, the run store and reports)
_NOT_THE_KERNELS = ("timing_unresolved",)


def review_feedback(result: ReviewResult) -> ReviewFeedback:
    log_tail = None
    if not result.correct and result.error_kind in ("crash", "timeout", "runtime_error") and result.log:
        log_tail = "\n".join(result.log.rstrip().splitlines()[-_LOG_LINES:])
    return ReviewFeedback(
        correct=result.correct,
        stage=result.stage,
        error_kind=result.error_kind,
        error=result.error,
        log_tail=log_tail,
        speedup=result.speedup,
        ref_ms=result.ref_ms,
        candidate_ms=result.candidate_ms,
        checks=[f"{c.name}: {c.detail}" for c in result.checks],
        flags=[f for f in result.flags if f.split(":")[0] not in _NOT_THE_KERNELS],
    )


def failed_feedback(kind: str, error: str) -> ReviewFeedback:
    """For a candidate the loop refused before reviewing it (wrong backend, no ModelNew)."""
    return ReviewFeedback(correct=False, stage="compile", error_kind=kind, error=error)


def verdict_of(feedback: ReviewFeedback) -> str:
    return verdict(feedback.correct, feedback.error_kind)


def reason_of(feedback: ReviewFeedback) -> str:
    """Why the kernel failed, for the console line and the report ("" for a correct one)."""
    if feedback.correct:
        return ""
    check = feedback.checks[0].split(": ")[0] if feedback.checks and feedback.error_kind == "rejected" else None
    return failure_reason(_with_exception(feedback.error), check)


# the last line of a Python traceback: `AttributeError: ...`, `triton.compiler.errors.CompilationError: ...`
_EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b.*$")


def _with_exception(error: str | None) -> str | None:
    """The error with the exception it names brought up to its second line: a runtime failure's message starts
    with where the candidate raised, and the exception itself (what a user needs to see) comes last."""
    lines = [line for line in (error or "").splitlines() if line.strip()]
    if len(lines) <= 2 or any(_EXCEPTION_LINE.match(line) for line in lines[:2]):
        return error
    found = [line for line in lines[2:] if _EXCEPTION_LINE.match(line)]
    return error if not found else "\n".join([lines[0], found[-1].strip()])


def decision_brief(decision: Advice) -> DecisionBrief:
    """The advice as the Planner reads it: bottleneck, case, allowed methods and the evidence that was known."""
    evidence = [f"{f.id} = {_fmt(f.value)}" for f in decision.fields if f.status == "ok"]
    evidence += [f"{f.id} = {_fmt(f.value)}" for f in decision.run_features if f.status == "ok"]
    evidence += [f"{name} = {_fmt(v.value)}" for name, v in decision.features.items() if v.status == "ok"]
    evidence += [f"predicate {name} is true" for name, t in decision.predicates.items() if t.state == "true"]
    # the trace keeps every caveat in full; the Planner gets each bounded (the lists of missing metrics run long)
    caveats = [c if len(c) <= _CAVEAT_CHARS else c[:_CAVEAT_CHARS] + " …" for c in decision.caveats]
    if decision.fallback:
        caveats.append(decision.fallback)
    return DecisionBrief(
        bottleneck=decision.bottleneck,
        case=decision.case,
        tier=decision.tier,
        allowed_methods=list(decision.allowed_methods),
        ranked=[RankedMethodBrief(method=r.method, gain=r.gain, why=r.why) for r in decision.ranking],
        forbidden_methods=list(decision.forbidden),
        evidence=evidence,
        caveats=caveats,
    )


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
