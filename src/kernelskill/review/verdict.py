"""The verdict on a candidate, decided once, on the judging side.

`decide` reads what the review saw from this process: how the candidate's runner ended (a timeout or a crash seen
from here, a failure it reported about itself), the judge's findings (review/judge.py), the speed-of-light floor and
the rule set. A runner's report can only lower the verdict; everything that could raise it (correct, the timing
figures) comes from the judge when the review was judged. The result is one immutable `Verdict`: the reviewer
copies its fields into the `ReviewResult` beside the runner's figures, which are records, not claims.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kernelskill.errors import ProblemError, SandboxError
from kernelskill.review.judge import JudgeReport
from kernelskill.review.precision import settle
from kernelskill.review.processes import describe_exit
from kernelskill.review.results import (Check, CompileResult, ErrorKind, JudgeBatch, Mismatch, PolicyResult,
                                        Precision, ReviewResult, SpeedOfLight, Stage, TimingResult)
from kernelskill.review.rules import RuleSet
from kernelskill.review.sandbox import WorkerOutcome

@dataclass(frozen=True)
class Verdict:
    correct: bool
    stage: Stage | None = None  # the stage that failed; None when correct (or a CUDA candidate compile-checked on CPU)
    error_kind: ErrorKind | None = None
    error: str | None = None
    checks: tuple[Check, ...] = ()
    flags: tuple[str, ...] = ()
    timing: TimingResult | None = None  # the judge's bounded timing (judged), else the runner's
    figures: bool = True  # the timing figures stand (False: a judged candidate that failed, its figures are hints)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    compile: CompileResult | None = None  # a compile failure's record
    precision: Precision | None = None
    speed_of_light: SpeedOfLight | None = None
    policy: PolicyResult | None = None
    judge_batch: JudgeBatch | None = None
    mismatch: Mismatch | None = None  # the judge's, where its comparison decided the verdict

    def fields(self) -> dict:
        """The ReviewResult fields this verdict decides."""
        out = {"correct": self.correct, "stage": self.stage, "error_kind": self.error_kind, "error": self.error,
               "flags": list(self.flags), "precision": self.precision, "speed_of_light": self.speed_of_light,
               "policy": self.policy, "judge_batch": self.judge_batch}
        if self.checks:
            out["checks"] = list(self.checks)
        if self.max_abs_error is not None:
            out.update(max_abs_error=self.max_abs_error, max_rel_error=self.max_rel_error)
        if self.compile is not None:
            out["compile"] = self.compile
        if self.mismatch is not None:
            out["judge_mismatch"] = self.mismatch
        if not self.figures:
            out.update(speedup=None, ref_ms=None, candidate_ms=None, speedup_vs_compile=None, compile_ms=None)
        elif self.timing is not None:
            t = self.timing
            out.update(timing=t, ref_ms=t.reference.mean_ms, candidate_ms=t.candidate.mean_ms, speedup=t.speedup,
                       speedup_vs_compile=t.speedup_vs_compile,
                       compile_ms=t.compiled_reference.mean_ms if t.compiled_reference else None)
        return out


@dataclass
class Seen:
    """What the judging side saw of one review: the candidate runner's end and report, the judge's findings."""

    outcome: WorkerOutcome
    report: JudgeReport | None = None  # when the judge ran its part
    judged: bool = False
    log_tail: str = ""
    limit: float = 0.0  # the stage limit a timeout ran past
    violations: list[Check] = field(default_factory=list)  # strict-only: static findings and the runner's


def _ending(seen: Seen, backend: str) -> Verdict:
    """How the review ended, before the floor and the rules: the first thing that decides it."""
    outcome, report = seen.outcome, seen.report
    found, message = outcome.results, outcome.verdict
    if message is not None and message.kind == "sandbox":
        raise SandboxError(message.error)
    if outcome.timed_out:
        return Verdict(False, outcome.stage, "timeout", f"the {outcome.stage} stage ran past its {seen.limit:g} s "
                       "limit (a hang or a very slow candidate); the worker was killed")
    if message is not None:
        if message.kind == "bad_problem":
            raise ProblemError(message.error)
        compile_ = (CompileResult(ok=False, backend=backend, errors=message.compile_errors or message.error)
                    if message.kind == "compile_error" else None)
        return Verdict(False, message.stage, message.kind, message.error, checks=tuple(message.checks or ()),
                       max_abs_error=message.max_abs_error, max_rel_error=message.max_rel_error, compile=compile_)
    if outcome.awaiting and report is None:  # a CUDA candidate on a CPU: compiled, nothing ran
        return Verdict(False)
    if outcome.awaiting and not report.ok:
        return Verdict(False, "time" if (report.check or "").startswith("judge:batch") else "verify", report.error_kind,
                       report.error, checks=(Check(name=report.check, detail=report.error),) if report.check else (),
                       max_abs_error=report.max_abs_error, max_rel_error=report.max_rel_error, figures=False,
                       mismatch=report.mismatch)
    if outcome.awaiting:
        worst = (None, None) if report.max_abs_error is None else (
            max(report.max_abs_error, found.max_abs_error or 0.0),
            max(report.max_rel_error or 0.0, found.max_rel_error or 0.0))
        return Verdict(True, timing=report.timing, max_abs_error=worst[0], max_rel_error=worst[1],
                       judge_batch=report.batch)
    if not outcome.finished:
        return Verdict(False, outcome.stage, "crash", f"{describe_exit(outcome.returncode)} during the "
                       f"{outcome.stage} stage" + (f":\n{seen.log_tail}" if seen.log_tail else ""))
    if not seen.judged:
        checked_only = found.compile is not None and found.compile.checked_only
        return Verdict(not checked_only)  # the runner's own report is the verdict (Guards(judge=False))
    # a judged runner ends a review by waiting for the judge, never with `done` alone
    return Verdict(False, outcome.stage or "load", "crash", "the candidate's runner ended its review without "
                   "waiting for the judge's checks; what it reported cannot be taken as a verdict")


def decide(seen: Seen, rules: RuleSet, backend: str, dtypes: list[str], weights: str | None = None,
           floor=None) -> Verdict:
    """The verdict: the review's ending, then the speed-of-light floor (`floor(timing)` → (SpeedOfLight, the
    rejecting Check or None, a flag or None), on a GPU), then the rule set over the strict-only violations."""
    found, report = seen.outcome.results, seen.report
    v = _ending(seen, backend)
    if seen.judged and not v.correct:  # a runner's figures for a candidate the judge did not pass: hints only
        v = replace(v, figures=False)
    # the judge's timing decides whether the figures are noisy: the runner's own noise flag is dropped beside it
    judge_timed = report is not None and report.timing is not None
    flags = [f for f in found.flags or [] if not (judge_timed and f.startswith("noisy_timing"))]
    flags += report.flags if report else []
    checks = list(v.checks)
    precision = settle(found.precision, dtypes, found.verify is not None and found.verify.ok,
                       found.kernels.profiled_kernels if found.kernels else ())
    if precision.reduced_precision:  # a flag, not a verdict: the configured tolerance decides
        flags.append("reduced_precision")
    sol = None
    timing = v.timing if v.timing is not None else found.timing
    if floor is not None and timing is not None:
        sol, rejection, flag = floor(timing)
        if rejection is not None and v.stage is None:
            checks.append(rejection)
            v = replace(v, correct=False, stage="time", error_kind="rejected", error=rejection_text([rejection]))
        elif flag is not None:
            flags.append(flag)
    kernelbench_ok = v.stage is None and v.correct
    other_inputs_ok = found.verify is None or not found.verify.failed_distributions
    policy = rules.policy(kernelbench_ok, seen.violations, other_inputs_ok, weights)
    if seen.violations:
        checks += seen.violations
        if not rules.violations_reject:  # each rule once, however many lines break it (the checks keep every line)
            flags = list(dict.fromkeys([*flags, *(c.name for c in seen.violations)]))
        elif v.stage is None:  # strict: a run that went through is rejected for what it leaned on
            v = replace(v, stage="verify", error_kind="rejected", correct=False, error=rejection_text(seen.violations))
    return replace(v, checks=tuple(checks), flags=tuple(flags), precision=precision, speed_of_light=sol,
                   policy=policy)


def rejection_text(checks: list[Check]) -> str:
    return (f"rejected by check {checks[0].name}: {checks[0].detail}"
            + (f" (and {len(checks) - 1} more)" if len(checks) > 1 else ""))


def keep_after_retry(first: ReviewResult, again: ReviewResult, excess_s: float) -> ReviewResult:
    """The result of a review whose batch left the candidate's claim unconfirmed by `excess_s` (a margin a busy host's
    hiccup explains: judge_time.worth_retrying) and of the second review that earned (fresh runners and inputs). A
    failure in the second is the verdict; a batch it confirmed gives its figure; otherwise the lower figure stands.
    Neither review's figure is raised: each was bounded by its own batch, and the one kept says what happened."""
    first_said = f"{first.speedup:.3g}x" if first.speedup is not None else "no figure"
    if not again.correct:
        kept, outcome = again, "failed, and its verdict is kept"
    elif again.judge_batch is not None and again.judge_batch.confirmed:
        kept, outcome = again, "confirmed them, and its figure is kept"
    else:
        kept = min((first, again), key=lambda r: r.speedup if r.speedup is not None else float("inf"))
        outcome = "did not confirm them either, and the lower figure is kept"
    flag = (f"timing_retried: the first review's batch ran {excess_s * 1e3:.1f} ms past what would have confirmed the "
            f"candidate's event times ({first_said} at the batch's pace); a second review, with fresh runners and "
            f"inputs, {outcome}")
    seconds = {**kept.stage_seconds, "first_review": first.stage_seconds.get("wall", 0.0)}
    return kept.model_copy(update={"flags": [*kept.flags, flag], "stage_seconds": seconds})


# worker/timed.py's method text where the graphed protocol's capture failed, and torch's words for a CUDA error
CAPTURE_FAILED, CUDA_ERROR = "the graphed protocol's capture was not used", "CUDA error"
# the failures a runner's broken state can explain. Never `rejected`: a named check that caught a candidate gives it
# no second draw of the judge's secret picks
AFTER_CAPTURE_KINDS = ("mismatch", "runtime_error", "crash")


# CUDA's words for an operation refused because a capture was under way or had failed
CAPTURE_ERRORS = ("during capture", "cudaErrorStreamCapture", "when stream is capturing")


def after_failed_capture(method: str | None, error: str | None = None) -> bool:
    """Whether a review that failed is looked at again with the candidate's calls launched one by one: its runner's
    graphed capture failed with a CUDA error (the time stage's `method` says so), or the runner's own verdict is a
    CUDA error about a capture (`error`: the time stage itself failed after one). A failed capture once left the
    runner's GPU random generator unusable, its trial inputs made on the CPU and failed (CUDA-L1's L1/32,
    docs/h200/kernelbench sessions 23-24; graphed.capturing now repairs it), so a failure after one may not be the
    candidate's alone. The runner's words only earn a second look: that review judges the candidate in full, in
    fresh runners, and times its calls eagerly, held to the reference's graph."""
    if method is not None and CAPTURE_FAILED in method and CUDA_ERROR in method:
        return True
    return error is not None and CUDA_ERROR in error and any(words in error for words in CAPTURE_ERRORS)


def eager_after_failed_capture(first: ReviewResult, again: ReviewResult) -> ReviewResult:
    """The second review's verdict (after_failed_capture), saying why there was one."""
    flag = (f"graph_capture_retried: the first review's runner could not capture the candidate's calls as a CUDA "
            f"graph (a CUDA error), and the review then failed ({first.error_kind}: {(first.error or '')[:200]}); "
            "a second review, in fresh runners with the candidate's calls launched one by one, gave this verdict")
    seconds = {**again.stage_seconds, "first_review": first.stage_seconds.get("wall", 0.0)}
    return again.model_copy(update={"flags": [*again.flags, flag], "stage_seconds": seconds})
