"""The Reviewer: compile → verify → time one candidate against one problem, in a sandboxed worker process.

`review()` is the single entry point used by the CLI, the agents' loop and the benchmark. It never raises for a
bad candidate (that is a verdict); it raises `KernelSkillError` only for what the user must fix (a malformed
problem file, asking for a GPU that is not there).
"""

from __future__ import annotations

import functools
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.candidate import Candidate
from kernelskill.errors import KernelSkillError, ProblemError, SandboxError
from kernelskill.problem import Problem, read_problem
from kernelskill.review import judge
from kernelskill.review.logs import trim_log
from kernelskill.review.pinning import timing_cpu
from kernelskill.review.precision import compute_dtypes
from kernelskill.review.results import Check, CompileResult, CompileWarmup, PolicyResult, Precision, ReviewResult
from kernelskill.review.caches import owner_key
from kernelskill.review.sandbox import WorkerOutcome, clean_environment, describe_exit, run_worker
from kernelskill.review.rules import RuleSet
from kernelskill.review.sol import assess as assess_speed_of_light
from kernelskill.review.static_checks import split_findings, static_checks
from kernelskill.review.turns import Turn
from kernelskill.review import judge_time
from kernelskill.review.judge_time import excess_s
from kernelskill.review.verdict import (AFTER_CAPTURE_KINDS, Seen, after_failed_capture, decide,
                                       eager_after_failed_capture, keep_after_retry, rejection_text)
from kernelskill.review.wire import ReviewRequest, Seeds
from kernelskill.settings import ReviewSettings

KERNELBENCH_SEED = 42  # the well-known seed a cheating candidate could precompute for; used only with the guard off


def resolve_device(requested: str) -> str:
    import torch

    has_gpu = torch.cuda.is_available()
    if requested == "auto":
        return "cuda" if has_gpu else "cpu"
    if requested == "cuda" and not has_gpu:
        raise KernelSkillError(
            "--device cuda was asked for, but PyTorch sees no CUDA GPU here (torch.cuda.is_available() is False). "
            "Run on a machine with an NVIDIA GPU and a CUDA build of PyTorch, or use --device cpu (Triton candidates "
            "then run in Triton's interpreter; CUDA candidates are compile-checked only)."
        )
    return requested


def _seeds(settings: ReviewSettings) -> Seeds:
    draw = (lambda: secrets.randbits(62)) if settings.guards.secret_seeds else None
    counter = iter(range(KERNELBENCH_SEED, KERNELBENCH_SEED + 10_000))
    pick = draw or (lambda: next(counter))
    return Seeds(
        init=pick(),
        warm=pick(),
        trials=[pick() for _ in range(settings.trials)],
        timing=[pick() for _ in range(settings.input_sets)],
        reverify=[pick() for _ in range(settings.reverify_trials)],
        order=secrets.randbits(62),
        profile_trial=secrets.randbelow(settings.trials),
    )


def review(
    problem: Problem | str | Path,
    candidate: Candidate,
    settings: ReviewSettings | None = None,
    log_dir: Path | None = None,
    env: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    release: Callable[[], None] | None = None,
    turn: Turn | None = None,
    candidate_graphs: bool = True,
) -> ReviewResult:
    """Review `candidate` against `problem`. `progress`, when given, is called with the name of each step as the
    review reaches it (the reference runner, each of the candidate runner's stages, the judge's part). `release`,
    when given, is called (at most once) as soon as no process of this review is left on the device: the rest is
    this process's own work on files, which need not hold the device from the next review. `turn`, when given, is
    the review's turn on a device it shares with other reviews (turns.py): its runners' stages and the judge's steps
    wait for it, the timed ones alone on the device. `candidate_graphs` False: the candidate runner times its calls
    launched one by one, whatever the protocol (the second review of verdict.after_failed_capture)."""
    settings = settings or ReviewSettings()
    say = progress or (lambda step: None)
    release = _once(release) if release is not None else None
    released: list[bool] = []  # whether the judge gave the device back before the review's end

    def device_done() -> None:
        released.append(True)
        if release is not None:
            release()
    if not isinstance(problem, Problem):
        problem = read_problem(problem)
    device = resolve_device(settings.device)
    backend = settings.backend or candidate.backend
    base = _base(problem, candidate, settings, device, backend)
    if candidate.syntax_error:
        return ReviewResult(**base, stage="compile", error_kind="compile_error", error=candidate.syntax_error,
                            compile=CompileResult(ok=False, backend=backend, errors=candidate.syntax_error))
    strict_only: list[Check] = []
    if settings.guards.static_checks:
        safety, strict_only = split_findings(static_checks(candidate.source, candidate.filename))
        if safety:  # never run, under either rule set
            return ReviewResult(**base, stage="verify", error_kind="rejected", checks=safety + strict_only,
                                error=rejection_text(safety), policy=PolicyResult(rules=settings.rules,
                                                                                  violations=strict_only))

    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kernelskill-review-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "worker.log"
    timeouts = settings.timeouts.model_dump()
    worker_env = candidate_environment(candidate, settings, device, env)
    start = time.perf_counter()
    cpu = timing_cpu(device, env) if settings.timing else None  # both runners' timed work on it (pinning.py)
    if not settings.guards.judge:  # the runner's own report is the verdict (tests prove the judge's guards so)
        outcome = run_worker(_request(problem, candidate, settings, device, backend), timeouts, log_path, worker_env,
                             reuse=settings.reuse_worker, progress=say, cpu=cpu)
        return _compose(base, outcome, settings, log_path, time.perf_counter() - start, strict_only, problem)
    # 1. the reference runner: the problem's code and nothing else, done before any candidate code runs
    nothing = Candidate(source="", backend="none")
    seeds = _seeds(settings)  # one draw for both runners: Model and ModelNew are built after the same seed
    say("reference runner")
    ref_began = time.perf_counter()
    ref_env = clean_environment(env, interpret=device == "cpu", sandbox=settings.sandbox, reference=True)
    ref_outcome = run_worker(_request(problem, nothing, settings, device, "none", seeds, mode="reference", judged=True),
                             timeouts, log_dir / "reference.log", ref_env, reuse=settings.reuse_worker, turn=turn)
    ref_run, ref_worker, retrying = None, ref_outcome.worker, False
    if ref_worker is None:
        return _reference_failed(base, ref_outcome, log_dir / "reference.log", time.perf_counter() - start)
    try:
        if backend != "cuda" or device != "cpu":  # a CUDA candidate on a CPU is only compile-checked: no trials
            ref_run = judge.reference_part(ref_worker, Path(ref_worker.scratch) / "judge", device, settings.timing,
                                           timeouts, turn, cpu, settings.baseline == "compile")
        if ref_run is None or not ref_run.batch_seeds:  # nothing left for it: it does not wait out the candidate
            ref_worker.kill(keep_scratch=True)
        ref_seconds = {"reference_start": ref_outcome.stage_seconds.get("start", 0.0),
                       "reference": round(time.perf_counter() - ref_began, 3),
                       **{k: round(v, 3) for k, v in (ref_run.seconds if ref_run else {}).items()}}
        if ref_run is not None and ref_run.error:
            return _reference_failed(base, ref_outcome, log_dir / "reference.log", time.perf_counter() - start,
                                     ref_run.error)
        # 2. the candidate runner: its own stages, then the judge's trials and batch; killed after
        eager = not candidate_graphs and settings.timing_protocol == "graphed"
        outcome = run_worker(_request(problem, candidate, settings.model_copy(update={"timing_protocol": "robust"})
                                      if eager else settings, device, backend, seeds, judged=True), timeouts, log_path,
                             worker_env, reuse=settings.reuse_worker, progress=say, turn=turn, cpu=cpu)
        report = None
        if outcome.awaiting:
            checked_only = outcome.results.compile is not None and outcome.results.compile.checked_only
            if ref_run is None or checked_only:
                outcome.worker.kill()
            else:
                say("judge: trials and batch")
                ref_run.pins_refused += outcome.pins_refused
                try:
                    report = judge.candidate_part(outcome.worker, ref_run, Path(outcome.worker.scratch) / "judge",
                                                  settings.atol, settings.rtol, timeouts,
                                                  outcome.results.timing if settings.timing else None, ref_worker,
                                                  device_done=device_done,
                                                  compare_on=judge.comparing_device(device, env),
                                                  turn=turn, hold_for_retry=settings.batch_retries > 0
                                                  and device in judge_time.RETRY_DEVICES)
                    retrying = report.ok and report.retry
                except judge.ReferenceFailed as exc:
                    return _reference_failed(base, ref_outcome, log_dir / "reference.log",
                                             time.perf_counter() - start, str(exc))
        timing, said = outcome.results.timing, outcome.verdict
        capture_retry = (candidate_graphs and not released and not (report is not None and report.ok)
                         and after_failed_capture(timing.method if timing else None, said.error if said else None))
        retrying = retrying or capture_retry
    finally:
        ref_worker.kill()
        if release is not None and not retrying:  # a retry keeps the device: the second review gives it back
            release()
    try:
        result = _compose(base, outcome, settings, log_path, time.perf_counter() - start, strict_only, problem,
                          report, judged=True)
        result.stage_seconds.update(ref_seconds)  # this side's clock: the reference runner's start and whole part
        if ref_run is not None:  # and its commands after the candidate's part (its batch's reserve)
            result.stage_seconds.update({k: round(v, 3) for k, v in ref_run.seconds.items()})
        if capture_retry and not result.correct and result.error_kind in AFTER_CAPTURE_KINDS:
            say("judge: a second review, the candidate's calls launched one by one (its graph capture failed)")
            again = review(problem, candidate, settings, log_dir / "eager", env, progress, release, turn,
                           candidate_graphs=False)
            return eager_after_failed_capture(result, again)
        if retrying and result.correct and result.judge_batch is not None:
            say("judge: a second review (the batch's clock did not confirm the first)")
            again = review(problem, candidate, settings.model_copy(update={"batch_retries": settings.batch_retries - 1}),
                           log_dir / "retry", env, progress, release, turn)
            return keep_after_retry(result, again, excess_s(result.judge_batch))
        return result
    finally:
        if release is not None:  # (given back once: a no-op where it was)
            release()


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    called = []

    def once() -> None:
        if not called:
            called.append(True)
            fn()
    return once


def _reference_failed(base: dict, outcome: WorkerOutcome, log_path: Path, wall: float,
                      error: str | None = None) -> ReviewResult:
    """The reference runner could not do its part: a problem that does not run raises ProblemError; anything else
    ends the review without a verdict on the candidate (it never ran), and says why."""
    verdict = outcome.verdict
    if verdict is not None and verdict.kind == "bad_problem":
        raise ProblemError(verdict.error)
    if verdict is not None and verdict.kind == "sandbox":
        raise SandboxError(verdict.error)
    if error is None:
        if outcome.timed_out:
            error = f"the reference runner ran past its {outcome.stage} stage's limit"
        elif verdict is not None:
            error = verdict.error
        else:
            error = describe_exit(outcome.returncode)
    tail = "\n".join((log_path.read_text(errors="replace") if log_path.exists() else "").rstrip().splitlines()[-15:])
    return ReviewResult(**base, stage="load", error_kind="crash", sandbox=outcome.sandbox, log_path=str(log_path),
                        stage_seconds={"wall": round(wall, 3)},
                        error=f"the reference runner (the problem's code alone) failed, so the candidate was not "
                              f"judged: {error}" + (f"\n{tail}" if tail else ""))


def _base(problem: Problem, candidate: Candidate, settings: ReviewSettings, device: str, backend: str) -> dict:
    """The fields every ReviewResult of this review starts from."""
    return dict(device=device, backend=backend, problem=str(problem.path), candidate=candidate.filename,
                settings=settings.model_dump(mode="json", exclude={"timeouts"}), compiled=False, correct=False,
                precision=Precision(compute_dtypes=compute_dtypes(candidate.source)))  # read here, not in the worker


def _request(problem: Problem, candidate: Candidate, settings: ReviewSettings, device: str, backend: str,
             seeds: Seeds | None = None, **build) -> ReviewRequest:
    """The worker's request; `build` (mode="build", arch=...) makes it a prebuild's."""
    unreadable = RuleSet.of(settings.rules).source_unreadable(backend)
    return ReviewRequest(
        problem_path=str(problem.path),
        problem_source=problem.source,
        # a name in angle brackets names no file: tracebacks still say which candidate, inspect finds nothing
        candidate_path=(f"<{candidate.filename}>" if unreadable else candidate.filename) if candidate.path else None,
        source_unreadable=unreadable,
        candidate_source=candidate.source,
        kernel_names=list(candidate.kernel_names),
        backend=backend,
        device=device,
        warmup=settings.resolved_warmup(device),
        iters=settings.resolved_iters(device),
        settings=settings,
        seeds=seeds or _seeds(settings),
        **build,
    )


@dataclass
class Prebuilt:
    """A CUDA candidate built ahead of its review. `result` is set when its sources do not compile: that verdict
    needs no GPU."""

    seconds: float
    result: ReviewResult | None = None
    # its worker's own seconds: "start" (the worker up, from the zygote), "compile" (the build, the module's import
    # and the meta call with it); the rest of `seconds` is the harness's side (waiting for a zygote, the pipes)
    stages: dict[str, float] = field(default_factory=dict)


def prebuild(
    problem: Problem | str | Path,
    candidate: Candidate,
    settings: ReviewSettings | None = None,
    log_dir: Path | None = None,
) -> Prebuilt | None:
    """Build a CUDA candidate's extensions into the shared build cache on CPU cores, in a worker that sees no GPU.

    Called before a review waits for its GPU, so the next candidates build while the GPU times the current one; the
    review then finds the build cached. Returns None when there is nothing to build ahead (a Triton candidate, no
    GPU to build for, a candidate the static checks will reject), and the compile failure when the sources do not
    compile. A build that needs the module at import time is left to the review.
    """
    settings = settings or ReviewSettings()
    backend = settings.backend or candidate.backend
    if backend != "cuda" or candidate.syntax_error or resolve_device(settings.device) != "cuda":
        return None
    if _refused(candidate, settings):
        return None
    arch = gpu_arch()
    if arch is None:
        return None
    if not isinstance(problem, Problem):
        problem = read_problem(problem)
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kernelskill-review-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "prebuild.log"
    request = _request(problem, candidate, settings, "cpu", backend, mode="build", arch=arch)
    start = time.perf_counter()
    # a fresh process per candidate (a fork of the zygote): a prebuild runs the candidate's module code, and no
    # candidate's code may share a process with another's
    outcome = run_worker(request, settings.timeouts.model_dump(), log_path,
                         clean_environment({"CUDA_VISIBLE_DEVICES": ""}, sandbox=settings.sandbox,
                                           owner=owner_key(candidate.source)), reuse=False)
    seconds = round(time.perf_counter() - start, 3)
    stages = {k: v for k, v in outcome.stage_seconds.items() if k in ("start", "compile")}
    if outcome.verdict is None or outcome.verdict.kind != "compile_error":
        return Prebuilt(seconds, stages=stages)
    result = _compose(_base(problem, candidate, settings, "cuda", backend), outcome, settings, log_path, seconds)
    result.stage_seconds = {"compile": outcome.stage_seconds.get("compile", seconds)}
    return Prebuilt(seconds, result, stages)


def candidate_environment(candidate: Candidate, settings: ReviewSettings, device: str,
                          env: dict[str, str] | None) -> dict[str, str]:
    """The candidate runner's environment, decided here alone: a spare started ahead (`warm_runner`) serves the
    review only when the two are the same. Its caches are its own (caches.py): what its code plants there is served
    to no other source."""
    return clean_environment(env, interpret=device == "cpu", sandbox=settings.sandbox,
                             owner=owner_key(candidate.source))


def _refused(candidate: Candidate, settings: ReviewSettings) -> bool:
    """The static checks refuse it before it runs (a prebuild or a runner started ahead is then not worth making)."""
    return settings.guards.static_checks and bool(split_findings(static_checks(candidate.source,
                                                                               candidate.filename))[0])


def warm_runner(problem: Problem | str | Path, candidate: Candidate, settings: ReviewSettings | None = None,
                env: dict[str, str] | None = None) -> bool:
    """Start the candidate's runner ahead of its review (a spare of its own: its caches are its source's alone, so
    a runner started for any other review could not serve it), while the review waits in line for the device.
    Returns whether one was started (never for a candidate the static checks reject, or beyond the pool's spares)."""
    from kernelskill.review.sandbox import POOL

    settings = settings or ReviewSettings()
    if not settings.reuse_worker or POOL.spares <= 0 or candidate.syntax_error:
        return False
    if _refused(candidate, settings):
        return False
    device = resolve_device(settings.device)
    try:
        return POOL.warm(candidate_environment(candidate, settings, device, env), device)
    except (OSError, SandboxError, RuntimeError):  # the review starts its own, and says why if that fails too
        return False


@dataclass
class Warmed:
    """A compile warm-up: torch.compile(Model)'s first call, made to fill Inductor's cache (None: it failed, `error`
    says why; the worker log has the rest)."""

    seconds: float  # wall seconds of the warm-up, worker start included
    warmup: CompileWarmup | None = None
    error: str | None = None
    retried: bool = False  # it failed in a worker that had warmed before, and was made again in a fresh one


def warm_compile(problem: Problem | str | Path, settings: ReviewSettings | None = None, log_dir: Path | None = None,
                 env: dict[str, str] | None = None) -> Warmed:
    """Compile the problem's reference with torch.compile into Inductor's cache, in a worker set up as a review's
    reference runner (the same sandbox, environment and caches, the reference built and called the same way), so a later
    `--baseline compile` review loads its graphs instead of compiling them on the GPU's clock. Nothing is timed and
    no candidate runs; the device is used for the one call, so call this only while nothing is being timed."""
    settings = settings or ReviewSettings()
    if not isinstance(problem, Problem):
        problem = read_problem(problem)
    device = resolve_device(settings.device)
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kernelskill-warm-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "warm.log"
    nothing = Candidate(source="", backend="none")
    request = _request(problem, nothing, settings, device, "none", mode="warm")
    start = time.perf_counter()
    # the reference runner's caches: it compiles and times the baseline in a judged review (worker/judged.py)
    worker_env = clean_environment(env, interpret=device == "cpu", sandbox=settings.sandbox,
                                   reference=settings.guards.judge)
    outcome = run_worker(request, settings.timeouts.model_dump(), log_path, worker_env, reuse=settings.reuse_worker)
    retried = outcome.results.compile_warmup is None and outcome.reused
    if retried:  # a process that warmed before can be what failed (its compile pool): once more in a fresh one
        failed = log_path.with_name("warm-reused-worker.log")
        os.replace(log_path, failed)
        outcome = run_worker(request, settings.timeouts.model_dump(), log_path, worker_env, reuse=False)
    seconds = round(time.perf_counter() - start, 3)
    if outcome.results.compile_warmup is not None:
        return Warmed(seconds, outcome.results.compile_warmup, retried=retried)
    if outcome.verdict is not None:
        error = outcome.verdict.error
    elif outcome.timed_out:
        error = f"timed out in stage {outcome.stage} (see {log_path})"
    else:
        error = f"the worker ended without a result (see {log_path})"
    return Warmed(seconds, error=error, retried=retried)


def prepare_builds() -> threading.Thread:
    """In the background: keep the build cache under its limit (KERNELSKILL_CACHE_MAX_GB), then build the precompiled
    headers (<torch/extension.h>, the bindings', the split host parts' for the GPU's arch) for the flag sets
    candidates use most (pch.COMMON_CFLAGS x COMMON_CUDA_CFLAGS, side by side), once per machine, torch and
    compiler, in the harness's folder its runners read (a runner never builds one, pch.py says why): the first CUDA
    candidates then build in seconds instead of paying for them. A failure is printed; builds then go without it."""

    def run() -> None:
        from concurrent.futures import ThreadPoolExecutor

        from kernelskill.review.cuda import cache, pch

        try:
            cache.auto_prune()
        except OSError as exc:  # a cache that cannot be pruned still works
            print(f"kernelskill: the build cache could not be pruned: {exc}", file=sys.stderr)
        from kernelskill.review.cuda import toolchain
        from kernelskill.review.cuda.inline import check_arch

        # without a GPU, CUDA candidates are compile-checked (inline's "check" mode) for check_arch(), with CUDA's
        # headers where the toolkit is installed, whatever torch was built for
        arch = gpu_arch() or check_arch()
        with_cuda = True if gpu_arch() is None and toolchain.cuda_home() is not None else None

        def one(flags: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
            try:
                pch.prepare_pch(list(flags[0]), arch=arch, extra_cuda_cflags=list(flags[1]), with_cuda=with_cuda)
            except Exception as exc:  # noqa: BLE001 - builds still work without the header, only slower
                print(f"kernelskill: the precompiled header for flags {' '.join(flags[0] + flags[1]) or '(none)'} "
                      f"could not be built ({type(exc).__name__}): {exc}", file=sys.stderr)

        sets = [(c, g) for c in pch.COMMON_CFLAGS for g in pch.COMMON_CUDA_CFLAGS]
        with ThreadPoolExecutor(len(sets), thread_name_prefix="kernelskill-pch") as pool:
            list(pool.map(one, sets))

    thread = threading.Thread(target=run, name="kernelskill-pch", daemon=True)
    thread.start()
    return thread


@functools.cache
def gpu_arch() -> str | None:
    """The arch a review's runner builds CUDA candidates for ("9.0+PTX", toolchain.default_arch), without creating a
    CUDA context in this process: a prebuild and the precompiled headers are made for exactly that, or the review
    finds neither in the cache."""
    from kernelskill.review.cuda.toolchain import listed_arch, default_arch

    if listed_arch():  # the runner sees the same variable (the allowlist passes TORCH*)
        return listed_arch()
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    caps = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return default_arch(caps[0]) if out.returncode == 0 and caps else None


def _compose(base: dict, outcome: WorkerOutcome, settings: ReviewSettings, log_path: Path, wall: float,
             strict_only: list[Check] | None = None, problem: Problem | None = None,
             report: judge.JudgeReport | None = None, judged: bool = False) -> ReviewResult:
    """The review's result: what the runner's stages reported (records, never claims), and the verdict, decided
    once on this side (review/verdict.py) from how the runner ended, the judge's `report` and the rule set."""
    found = outcome.results
    log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
    seen = Seen(outcome=outcome, report=report, judged=judged,
                log_tail="\n".join(log_text.rstrip().splitlines()[-15:]),
                limit=getattr(settings.timeouts, outcome.stage or "load"),
                violations=[*(strict_only or []), *(found.policy_violations or [])])
    floor = None
    if problem is not None and base["device"] == "cuda":
        def floor(timing):
            return assess_speed_of_light(timing, problem, found.device_name, found.output_bytes)
    verdict = decide(seen, RuleSet.of(settings.rules), base["backend"], base["precision"].compute_dtypes,
                     found.weights, floor)
    stage_seconds = {"start": 0.0, **outcome.stage_seconds, "wall": round(wall, 3)}  # start: worker start-up
    if report is not None:  # the judge's own parts, the candidate's batch included (judge_batch)
        stage_seconds.update({k: round(v, 3) for k, v in report.seconds.items()})
    return ReviewResult(**{
        **base,
        **{name: getattr(found, name) for name in REPORTED},
        "compiled": bool(found.compiled),
        "stage_seconds": stage_seconds,
        "log": trim_log(log_text) or None,
        "log_path": str(log_path),
        "sandbox": outcome.sandbox,
        **verdict.fields(),
    })


# what the stages report that a ReviewResult shows as it is
REPORTED = {"device_name", "max_abs_error", "max_rel_error", "ref_ms", "candidate_ms", "speedup", "compile_ms",
            "speedup_vs_compile", "compile", "verify", "timing", "kernels"}
