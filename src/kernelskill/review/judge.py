"""The judging side of a review: the checks that decide a verdict, made in this process, where no problem or
candidate code ever ran.

Two runners do the running. The reference runner has run the problem's code and nothing else. The candidate runner
has run the candidate and, after its own stages, still waits for commands; it is killed when the judge is done with
it and never serves another review. A runner's own report (its stages' results) is a hint that can only lower the
verdict: this module establishes everything a candidate could want raised.

- Correctness: the judge draws fresh seeds, the reference runner writes the reference's outputs for them, the
  candidate runner then (and only then) learns the seeds and writes the candidate's; the judge compares the files.
- Time: the reference's time comes from the reference runner, timed before the candidate runner has seen any
  candidate code; the candidate runner's own timing of the reference may be slower than that by REF_SLACK at most.
  The candidate's event time is held against physics: both runners run one batch of calls on fresh inputs (the
  reference runner makes them from seeds it learns only then and writes them to one file, which the candidate
  runner gets after its own stages), in three parts the judge times with its own clock: `prepare` (the input file
  loaded onto the device), `calls` (one call per input set, back to back) and `commit` (every output written to one
  file before the judge says which it will compare). The reference's `calls` part less its own time per call is
  the part's fixed cost; the candidate's less that bounds what its calls really took: an event time the wall
  clock does not confirm is replaced by it.
  No work can leave the `calls` part for the others, whose file transfers excuse tens of milliseconds on a GPU:
  the input file is masked with a key each runner gets only with `calls` (nothing to compute on in `prepare`), and
  `calls` ends with each call's digest, which the judge checks on DIGEST_CHECKS calls of what `commit` wrote
  (nothing left to compute there) (exchange.py).
  Before its batch each runner makes, untimed, every allocation its `prepare` and `calls` will make (`reserve`; the
  candidate's before its input file is handed over), so neither side's calls pay the driver for memory the other's
  do not.
  After the batch the candidate's runner is killed, with everything it started; only then does the reference runner,
  idle until now, run its batch, so the two batches are seconds apart (a busy machine, a bench building the next
  candidates, weighs on both alike) and nothing of the candidate's runs beside the reference's. Then the outputs
  of calls the judge picks only now are compared.
"""

from __future__ import annotations

import math
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.review.exchange import BATCH_INPUTS, hand_over
from kernelskill.review.judge_files import (_compare_files, check_digests, compare_samples,  # noqa: F401
                                            comparing_device)
from kernelskill.review.quiet import BUILDS
from kernelskill.review.turns import Kind, Turn
from kernelskill.review.results import CompileWarmup, JudgeBatch, Mismatch, TimingResult, TimingStats
from kernelskill.review.wire import Command

JUDGE_TRIALS = 3  # trials on seeds only the judge knew
# outputs of the candidate's batch compared whole, picked after it answered: at least BATCH_PICKS, and up to
# MAX_PICKS while they take no more than PICK_BYTES a side; and every other call of it at SAMPLED_ELEMENTS positions
# of each output tensor drawn after the fact (all of a smaller one), reading a few KB a call. A runner that skips
# the work of a fraction f of its calls passed the picks alone with probability (1 - f)^picks (9% at a third with 6);
# the samples catch each such call. Skipping a fraction g of each call's elements passes (1 - g)^(256 x calls): the
# whole picks are left for sparse wrong elements, and at tens of MB a call three of them, not six, take a third off
# what the judge compares while it holds the GPU with its 3 trials (1.9 s a review on CUDA-L1's level 2, H100)
BATCH_PICKS, MAX_PICKS, PICK_BYTES = 3, 32, 64 << 20
SAMPLED_ELEMENTS = 256
DIGEST_CHECKS = 64  # calls of its batch whose outputs the judge holds to the digests the runner said (all, if fewer)
BATCH_TARGET_S = {"cuda": 0.1, "cpu": 0.05}  # the reference's share of a batch: long against the judge's latency
# inputs and outputs a batch may hold at once. Most KernelBench level-1 batches fill it before BATCH_TARGET_S (sets
# of 1-100 MB), and moving it costs both runners: at 2 GB the batch's input file, the two batches' `prepare` and
# `commit` took 1.0-1.4 s of a review's median 3.4 s of GPU hold on the H100
BATCH_BYTES = 1 << 30
MIN_BATCH, MAX_BATCH = 3, 2000
REF_SLACK = 0.05  # the candidate runner's reference may be this much slower than the reference runner's
WALL_TOL = 0.3  # a candidate's calls may take this much longer by the judge's clock than by its own events
# plus this much per batch: what the judge's own latency (pipes, process wake-ups) may differ between the two sides'
# batches, beyond the reference's, which is subtracted. Over session 9's 53 confirmed honest timings on the H100
# the candidate's calls overran its claim (plus WALL_TOL) by at most 0.39 ms a batch (docs/h200/trust, session 13);
# at 2 ms, 21 of them would have been confirmed for claims 1.5x smaller as well, 5 for any claim; at 1 ms, 18 and 2
WALL_ABS_S = 0.001
OVERHEAD_CAP_S = 0.01  # the most of a batch's `calls` part taken for the judge's latency rather than calls
# plus this much per GB of the batch's input file: unmasking it is in the part too (a draw and an XOR pass, about
# 3 GB of device memory traffic a GB: a millisecond at an H200's 4.8 TB/s; 0.5 s on this project's 2-core CI host)
UNMASK_S_PER_GB = {"cuda": 0.005, "cpu": 1.0}
# A confirmed claim the batch would have confirmed this many times smaller as well is flagged: the judge's clock
# could not tell it from a lie (a batch whose calls take a few milliseconds in all, against WALL_ABS_S)
UNRESOLVED_FACTOR = 1.5
PHASE_TOL, PHASE_ABS_S = 0.25, 0.005  # until session 14 the candidate's prepare and commit were allowed this much
# longer than the reference's, the excess counted as its calls'. On a GPU their file transfers took 3 ms to 3.9 s
# on the H100, and a quarter of that is more than the whole calls part of most level-1 batches (docs/h200/trust,
# session 13): work moved there went unseen until the input file was masked and the outputs digested (module
# docstring). Kept to read batches from before (fastest_confirmable, movable)
BATCH_PARTS = ("prepare", "calls", "commit")
# The candidate's batch is cut (verdict: timeout) when a part runs past this many times what its calls should take
# at the slower of its own claimed pace and the reference's, plus a floor and a share for the bytes it moves: a
# runner whose calls are 20x slower than its own timing says has no figure to confirm, and an attacker's batch of
# 2000 calls at 20 ms each cost the judge 41.6 s on the H200 before this cut
BATCH_CUT_FACTOR = 20.0
BATCH_CUT_FLOOR_S = 5.0
BATCH_CUT_S_PER_GB = 2.0
MAX_SAMPLES = 100_000


@dataclass
class ReferenceRun:
    """What the reference runner produced for one review, and where its files are."""

    folder: Path
    trial_seeds: list[int]
    batch_seeds: list[int]
    stats: TimingStats | None = None  # the reference timed in the reference runner
    host_ms: float | None = None  # its median host time to enqueue one call
    compiled: TimingStats | None = None  # torch.compile(Model), timed beside it (`--baseline compile`)
    compiled_host_ms: float | None = None
    compile_warmup: CompileWarmup | None = None  # the compile's first call, before the loop
    compile_error: str | None = None  # why there is no compile baseline
    batch_walls: dict[str, float] = field(default_factory=dict)  # the batch's parts, by the judge's clock
    mask_key: int = field(default_factory=lambda: secrets.randbits(63))  # the batch's input file's (exchange.py)
    overhead_cap_s: float = OVERHEAD_CAP_S  # the most of the `calls` part taken for other than calls
    output_bytes: int = 0  # one call's outputs
    input_bytes: int = 0  # one call's inputs
    said_calls_s: float = -1.0  # what the reference runner says its batch's calls loop took (a hint, never used)
    stateful: bool = False
    target_s: float = 0.05  # how long a batch should take on this device (BATCH_TARGET_S)
    error: str | None = None  # why the reference runner could not do its part (the review then fails closed)
    seconds: dict[str, float] = field(default_factory=dict)  # its commands, by the judge's clock


@dataclass
class JudgeReport:
    """The judge's findings on one candidate: they decide the verdict (reviewer.py applies them)."""

    ok: bool = False  # the candidate's outputs matched on every judged trial and picked batch call
    error_kind: str | None = None  # "mismatch", "rejected" or "crash" when not ok
    error: str | None = None
    check: str | None = None  # the check's name for a rejection
    mismatch: Mismatch | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    flags: list[str] = field(default_factory=list)
    timing: TimingResult | None = None  # the runner's timing, bounded
    batch: JudgeBatch | None = None  # what bounded it, for the record
    seconds: dict[str, float] = field(default_factory=dict)  # the judge's own parts, by its clock


def draw_seeds(n: int) -> list[int]:
    return [secrets.randbits(62) for _ in range(n)]


def _run(worker, command: Command, limit: float) -> tuple[dict | None, float, str | None]:
    """(info, wall seconds, error) of one command; error says why there is no answer."""
    done, wall = worker.command(command, limit)
    if done is None:
        return None, wall, f"the runner gave no answer to `{command.name}` within {limit:g} s (it died or hung)"
    if done.error:
        return None, wall, done.error
    return done.info, wall, None


def _step(turn: Turn | None, kind: Kind):
    """A step of `kind` on the review's shared device (turns.py); nothing to wait for on a device of its own."""
    return turn.step(kind) if turn is not None else nullcontext()


def reference_part(worker, folder: Path, device: str, timing: bool, limits: dict[str, float],
                   turn: Turn | None = None) -> ReferenceRun:
    """Everything the reference runner does for a review, before the candidate runner has run any candidate code.
    Under a `turn`, its timing is a timed step and the rest plain ones."""
    run = ReferenceRun(folder=folder, trial_seeds=draw_seeds(JUDGE_TRIALS), batch_seeds=[],
                       target_s=BATCH_TARGET_S[device])
    with _step(turn, "plain"):  # one step for both commands: each step asked for may wait out others' timed ones
        info, run.seconds["reference_stateful"], error = _run(worker, Command(name="stateful", seeds=draw_seeds(1)),
                                                              limits["verify"])
        if error:
            run.error = f"checking whether the reference keeps state across calls failed: {error}"
            return run
        run.stateful = bool(info.get("stateful"))
        info, run.seconds["reference_trials"], error = _run(
            worker, Command(name="outputs", seeds=run.trial_seeds, out_dir=str(folder / "trials")), limits["verify"])
    if error:
        run.error = f"the reference's outputs for the judge's trials: {error}"
        return run
    run.output_bytes = int(info.get("bytes", 0)) // max(1, len(run.trial_seeds))
    if not timing:
        return run
    with _step(turn, "timed"):
        info, run.seconds["reference_time"], error = _run(worker, Command(name="time_reference", seeds=draw_seeds(3)),
                                                          limits["time"])
    if error:
        run.error = f"timing the reference in its own runner failed: {error}"
        return run
    run.stats = _stats(info.get("reference"))
    run.host_ms = info.get("host_ms")
    run.compiled, run.compiled_host_ms = _stats(info.get("compiled_reference")), info.get("compiled_host_ms")
    run.compile_warmup = CompileWarmup.model_validate(info["compile_warmup"]) if info.get("compile_warmup") else None
    run.compile_error = info.get("compile_error")
    if run.stats is None:
        run.error = "the reference runner's timing was not usable"
        return run
    per_call_s = max(run.stats.median_ms, run.host_ms or 0.0) / 1e3
    run.input_bytes = int(info.get("input_bytes", 0))
    size = BATCH_BYTES // max(1, 2 * run.output_bytes + run.input_bytes)
    count = min(MAX_BATCH, size, max(MIN_BATCH, math.ceil(BATCH_TARGET_S[device] / max(per_call_s, 1e-7))))
    run.batch_seeds = draw_seeds(max(MIN_BATCH, count))
    with _step(turn, "plain"):
        info, run.seconds["reference_inputs"], error = _run(worker, Command(
            name="inputs", seeds=run.batch_seeds, out_dir=str(folder / "batch"), key=run.mask_key), limits["time"])
    if error:
        run.error = f"making the batch's inputs failed: {error}"
    else:
        run.overhead_cap_s += UNMASK_S_PER_GB[device] * int(info.get("region_bytes", 0)) / 1e9
    return run  # the reference's batch itself runs after the candidate's (reference_batch)


class ReferenceFailed(RuntimeError):
    """The reference runner could not do its part after the candidate's: the review cannot be judged, and that is
    no fault of the candidate's."""


def reference_batch(worker, ref: ReferenceRun, limit: float) -> None:
    """The reference's batch, run by its runner (idle since its own part) once the candidate's runner is dead."""
    if worker is None or not worker.alive():
        raise ReferenceFailed("the reference runner was gone before its batch")
    # its allocations made ahead, as the candidate runner's were (worker/judged.reserve)
    _, ref.seconds["reference_reserve"], error = _run(
        worker, Command(name="reserve", seeds=draw_seeds(len(ref.batch_seeds)), reserve_bytes=ref.output_bytes), limit)
    if error:
        raise ReferenceFailed(f"making the reference's batch allocations failed: {error}")
    with BUILDS.quiet(worker):
        ref.batch_walls, error, ref.said_calls_s, _ = _batch(worker, ref.batch_seeds, ref.folder / "batch", limit,
                                                             ref.output_bytes, ref.mask_key)
    if error:
        raise ReferenceFailed(f"the reference's batch failed: {error}")


def _batch(worker, seeds: list[int], folder: Path, limit: float, reserve_bytes: int, key: int
           ) -> tuple[dict[str, float], str | None, float, object]:
    """The batch's three parts, each timed by this process's clock and limited to `limit` seconds: ({part: seconds},
    error, what the runner says its calls loop took: a hint for the record, never used, -1 when it said nothing,
    the digests it said its calls' outputs have). A part that ran past its limit is the last in the dict, with its
    seconds at or past the limit."""
    walls: dict[str, float] = {}
    said, digests = -1.0, None
    for part in BATCH_PARTS:
        command = Command(name=part, seeds=seeds if part == "prepare" else [],
                          out_dir=None if part == "calls" else str(folder),
                          reserve_bytes=reserve_bytes if part == "prepare" else 0, key=key if part == "calls" else None)
        info, walls[part], error = _run(worker, command, limit)
        if part == "calls" and isinstance(info, dict):
            said = float(info["calls_s"]) if isinstance(info.get("calls_s"), (int, float)) else said
            digests = info.get("digests")
        if error:
            return walls, error, said, digests
    return walls, None, said, digests


def batch_cut(ref: ReferenceRun, runner_timing: TimingResult, calls: int, limit: float) -> tuple[float, float]:
    """(the seconds each part of the candidate's batch may take, the per-call seconds that allowance rests on). The
    pace is the slowest of the candidate's claimed median and host time and the reference's: a runner that claims
    a slow host to earn a longer batch has claimed a lower speedup too."""
    host_ms = (runner_timing.host_us or {}).get("candidate", 0.0) / 1e3
    per_call_s = max(runner_timing.candidate.median_ms, host_ms, ref.stats.median_ms if ref.stats else 0.0,
                     ref.host_ms or 0.0) / 1e3
    moved_gb = calls * (ref.output_bytes + ref.input_bytes) / 1e9
    cut = BATCH_CUT_FLOOR_S + BATCH_CUT_S_PER_GB * moved_gb + BATCH_CUT_FACTOR * calls * per_call_s
    return min(limit, cut), per_call_s


def _stats(raw) -> TimingStats | None:
    """Stats recomputed from a runner's samples (its mean, median … are not taken as given); None if unusable."""
    try:
        samples = [float(s) for s in raw["samples_ms"]]
    except (TypeError, KeyError, ValueError):
        return None
    if not samples or len(samples) > MAX_SAMPLES or not all(math.isfinite(s) and s > 0 for s in samples):
        return None
    return TimingStats.from_samples(samples)


def candidate_part(worker, ref: ReferenceRun, cand_folder: Path, atol: float, rtol: float,
                   limits: dict[str, float], runner_timing: TimingResult | None, ref_worker=None,
                   device_done: Callable[[], None] | None = None, compare_on: str = "cpu",
                   turn: Turn | None = None) -> JudgeReport:
    """The judge's trials and batch on a candidate runner that waits for commands; kills the runner at the end.
    `ref_worker`, the reference runner, waits for commands too: it runs the reference's batch after the candidate's
    (raises ReferenceFailed when it cannot), and is killed after it. Outputs are compared on device `compare_on`
    (comparing_device). `device_done` is called once neither runner is left and the outputs are compared: what
    remains (the timing bounded, the files removed) is this process's work on the host, and the device may serve
    the next review meanwhile. Under a `turn` (a device shared with other reviews, turns.py) the two batches, with
    the candidate runner's kill between them, are one timed step; the rest are plain steps."""
    report = JudgeReport()
    max_bytes = 4 * ref.output_bytes + (1 << 20)
    dying: threading.Thread | None = None  # the reference runner, killed while the picked outputs are compared
    try:
        if ref.stateful:
            report.flags.append("judge_trials_skipped: the reference answers the same inputs differently from call "
                                "to call (it keeps state), so only the runner's own lockstep trials compared outputs")
        else:
            with _step(turn, "plain"):  # the trials and their comparison: one step
                info, report.seconds["judge_trials"], error = _run(
                    worker, Command(name="outputs", seeds=ref.trial_seeds, out_dir=str(cand_folder / "trials")),
                    limits["verify"])
                if error:
                    return _fail(report, "runtime_error", f"on the judge's trials the candidate failed: {error}")
                began = time.perf_counter()
                ok, why, mismatch, report.max_abs_error, report.max_rel_error = _compare_files(
                    ref.folder / "trials", cand_folder / "trials", list(range(len(ref.trial_seeds))), atol, rtol,
                    max_bytes, on=compare_on)
                report.seconds["judge_compare"] = time.perf_counter() - began
            if not ok:
                report.mismatch = mismatch
                return _fail(report, "mismatch", f"judge's trial on fresh inputs: {why}")
        if ref.batch_seeds and runner_timing is not None:
            calls = batch_calls(ref, runner_timing)
            # the allocator's blocks for the batch's sets, as the reference runner holds them (worker/judged.reserve);
            # before the hand-over, so the runner knows nothing of the batch's inputs yet
            with _step(turn, "plain"):
                _, report.seconds["judge_reserve"], error = _run(worker, Command(
                    name="reserve", seeds=draw_seeds(calls), reserve_bytes=ref.output_bytes), limits["time"])
            if error:
                return _fail(report, "runtime_error", f"making input sets before the judge's batch failed: {error}")
            hand_over(ref.folder / "batch" / BATCH_INPUTS, cand_folder / "batch" / BATCH_INPUTS)
            cut, per_call_s = batch_cut(ref, runner_timing, calls, limits["time"])
            if turn is not None:  # one timed step until the reference's batch has run (or `finally` ends it)
                turn.begin("timed")
            with BUILDS.quiet(worker):  # the builds of later candidates stopped while the batch runs (quiet.py)
                walls, error, said, digests = _batch(worker, ref.batch_seeds[:calls], cand_folder / "batch", cut,
                                                     ref.output_bytes, ref.mask_key)
            began = time.perf_counter()
            worker.kill(keep_scratch=True)  # nothing it started may touch the files, or run beside the reference
            report.seconds["judge_kill"] = time.perf_counter() - began
            report.seconds["judge_batch"] = round(sum(walls.values()), 3)
            if error and cut < limits["time"] and list(walls.values())[-1] >= cut:
                part = list(walls)[-1]
                return _fail(report, "timeout", f"the judge's batch of {calls} calls was stopped: its `{part}` part "
                             f"ran past {cut:.1f} s, {BATCH_CUT_FACTOR:g}x what the calls take at "
                             f"{per_call_s * 1e6:.1f} us each (the slower of the pace the candidate's own timing "
                             "claimed and the reference's) plus time to move its data; calls that much slower than "
                             "their own timing says leave no figure to confirm", check="judge:batch-time")
            if error:
                return _fail(report, "runtime_error", f"in the judge's batch of calls the candidate failed: {error}")
            began = time.perf_counter()
            reference_batch(ref_worker, ref, limits["time"])
            report.seconds["judge_reference_batch"] = time.perf_counter() - began
            if turn is not None:
                turn.end()
            # its end is waited for beside the comparison (which times nothing), and before the device is given back
            dying = _kill_aside(ref_worker, report.seconds, "reference_kill")
            wanted = max(BATCH_PICKS, min(MAX_PICKS, PICK_BYTES // max(1, ref.output_bytes)))
            picks = sorted(secrets.SystemRandom().sample(range(calls), min(wanted, calls)))
            if not ref.stateful:
                with _step(turn, "plain"):
                    began = time.perf_counter()
                    ok, why, mismatch, _, _ = _compare_files(ref.folder / "batch", cand_folder / "batch", picks,
                                                             atol, rtol, max_bytes,
                                                             batch_of=(len(ref.batch_seeds), calls), on=compare_on)
                report.seconds["judge_compare"] = report.seconds.get("judge_compare", 0.0) + time.perf_counter() - began
                if not ok:
                    report.mismatch = mismatch
                    return _fail(report, "rejected", f"outputs of calls in a batch timed by the judge differ from the "
                                 f"reference ({why}); every call must compute its result", check="judge:batch-outputs")
            dying.join()
            dying = None
            if device_done is not None:
                device_done()
            held = sorted(set(picks) | set(secrets.SystemRandom().sample(range(calls), min(DIGEST_CHECKS, calls))))
            why = check_digests(cand_folder / "batch", digests, held, max_bytes * calls, calls)
            if why:
                return _fail(report, "rejected", f"in the judge's batch, {why}: a call's work must be done inside "
                             "the timed calls, not while its outputs are written", check="judge:batch-digests")
            rest = sorted(set(range(calls)) - set(picks)) if not ref.stateful else []
            why, report.mismatch = compare_samples(ref.folder / "batch", cand_folder / "batch", rest, atol, rtol,
                                                   max_bytes, (len(ref.batch_seeds), calls), SAMPLED_ELEMENTS)
            if why:
                return _fail(report, "rejected", f"outputs of calls in a batch timed by the judge differ from the "
                             f"reference ({why}); every call must compute its result", check="judge:batch-samples")
            report.timing, flags, report.batch = bound_timing(runner_timing, ref, walls, calls)
            report.batch.checked_calls, report.batch.digests_checked = picks, len(held)
            report.batch.sampled_calls = len(rest)
            report.batch.runner_calls_s = {"reference": round(ref.said_calls_s, 6), "candidate": round(said, 6)}
            report.flags += flags
    finally:
        if dying is not None:
            dying.join()
        if turn is not None:
            turn.end()  # the timed step of the batches, when the review ended inside it
        worker.kill()
        shutil.rmtree(cand_folder, ignore_errors=True)
    report.ok = True
    return report


def _kill_aside(worker, seconds: dict[str, float], key: str) -> threading.Thread:
    """Kill `worker`, its scratch kept, on a thread of its own: the wait until its tree has ended (a process giving
    back a CUDA context and its memory) runs beside this thread's work. Join it before the device is given back."""
    def kill() -> None:
        began = time.perf_counter()
        worker.kill(keep_scratch=True)
        seconds[key] = time.perf_counter() - began

    thread = threading.Thread(target=kill, name="kernelskill-kill", daemon=True)
    thread.start()
    return thread


def batch_calls(ref: ReferenceRun, runner_timing: TimingResult) -> int:
    """How many of the reference's batch calls the candidate runs: as many as fill the batch's target time at the
    slower of the two paces, the candidate's by its own claim. A slow candidate (Triton's interpreter on a CPU)
    then costs the judge no more time than a fast one, and a candidate that claims to be slower to get a shorter
    batch has claimed its own lower speedup: the batch still bounds that claim."""
    claimed_ms = max(runner_timing.candidate.median_ms, ref.stats.median_ms if ref.stats else 0.0)
    fill = math.ceil(ref.target_s / max(claimed_ms / 1e3, 1e-7))
    return max(min(MIN_BATCH, len(ref.batch_seeds)), min(len(ref.batch_seeds), fill))


def _fail(report: JudgeReport, kind: str, error: str, check: str | None = None) -> JudgeReport:
    report.ok, report.error_kind, report.error, report.check = False, kind, error, check
    return report


def bound_timing(timing: TimingResult, ref: ReferenceRun, walls: dict[str, float], calls: int
                 ) -> tuple[TimingResult, list[str], JudgeBatch]:
    """The runner's timing, recomputed from its samples and held to what the judge measured (module docstring).

    Where the candidate's events are not confirmed, both sides are put at their pace in the batch, measured the same
    way: a part's calls less the judge's latency, per call. (The reference at its runner's host time per call instead
    would leave the candidate alone paying for what a batch adds to every call, the copy of its outputs.)"""
    flags = []
    runner_ref = _stats(timing.reference.model_dump()) or ref.stats
    cand = _stats(timing.candidate.model_dump())
    if cand is None:
        raise RuntimeError("the candidate runner's timing samples are not usable")
    ref_stats = runner_ref
    if runner_ref.mean_ms > ref.stats.mean_ms * (1 + REF_SLACK):
        flags.append(f"reference_slowed: beside the candidate the reference took {runner_ref.mean_ms * 1e3:.1f} us, "
                     f"in a runner of its own {ref.stats.mean_ms * 1e3:.1f} us; the speedup uses the latter")
        ref_stats = ref.stats
    # the batch: the reference's `calls` part less its calls is what the part costs besides them (the judge's
    # latency, the unmasking); the `prepare` and `commit` parts hold no work of the calls' (masked inputs, digested
    # outputs) and are not counted: their file transfers' noise put an honest g01 kernel (256 MB a call) at 37x its
    # pace on the H100 when they were
    ref_call_s = max(ref.stats.median_ms, ref.host_ms or 0.0) / 1e3
    # (capped: a reference batch slowed by a busy machine must not excuse the candidate's calls)
    overhead_s = min(ref.overhead_cap_s, max(0.0, ref.batch_walls["calls"] - len(ref.batch_seeds) * ref_call_s))
    # (the reference's parts held all its batch's calls; the candidate's as many as it ran: counted pro rata)
    share = calls / len(ref.batch_seeds)
    wall_call_s = max(0.0, walls["calls"] - overhead_s) / calls
    ref_pace_s = max(ref_call_s, (ref.batch_walls["calls"] - overhead_s) / len(ref.batch_seeds))
    claimed_s = cand.median_ms / 1e3
    fields = {k: getattr(timing, k) for k in ("clock", "method", "warmup", "iters", "retimed", "group", "prefill_us",
                                                "host_us", "spin_outrun")}
    # at the pace of calls made back to back from Python: each side's pace in its batch, by the judge's clock (the
    # runner's own figure, from its claimed host times, is never taken; host_us stays only as its hint)
    fields["speedup_host_paced"] = round(ref_pace_s / wall_call_s, 4) if wall_call_s > 0 else None
    confirmed = wall_call_s <= claimed_s * (1 + WALL_TOL) + WALL_ABS_S / calls
    fastest_s, _ = fastest_confirmable(wall_call_s, calls, ref.batch_walls, walls, share)
    if confirmed and claimed_s > UNRESOLVED_FACTOR * fastest_s:
        flags.append(f"timing_unresolved: the judge's batch of {calls} calls took {walls['calls'] * 1e3:.2f} ms by "
                     f"its clock, against {WALL_ABS_S * 1e3:g} ms allowed for its own latency: it would have "
                     f"confirmed any event time down to {fastest_s * 1e6:.1f} us, and the runner's events say "
                     f"{claimed_s * 1e6:.1f} us. The speedup rests on those events (below that, only the "
                     "speed-of-light floor bounds them, where the device's peaks are known)")
    if not confirmed:
        flags.append(f"timing_unconfirmed: by the judge's clock the candidate's calls took {wall_call_s * 1e6:.1f} us "
                     f"each in a batch of {calls}, its own events say {claimed_s * 1e6:.1f} us (work outside the "
                     "timed region, launches slower than the GPU, or a runner that misreports); the speedup uses "
                     "both sides' wall-clock pace")
        cand = _scaled(cand, wall_call_s / claimed_s)
        ref_stats = _scaled(ref_stats, max(1.0, ref_pace_s * 1e3 / ref_stats.median_ms))
        fields["method"] += "; the candidate's event times were not confirmed by the judge's clock, so both sides " \
                            "are scaled to their wall-clock pace in a batch of back-to-back calls"
    result = TimingResult.of(ref_stats, cand, **fields)
    if result.noisy:  # the noise verdict is the judge's, on the figures it kept; the runner's says nothing
        flags.append(f"noisy_timing: {result.noisy_reason}")
    from kernelskill.review.timing import compile_baseline

    flags += compile_baseline(result, ref, wall_call_s * 1e3)
    batch = JudgeBatch(calls=calls, reference_calls=len(ref.batch_seeds),
                       reference_s={k: round(v, 6) for k, v in ref.batch_walls.items()},
                       candidate_s={k: round(v, 6) for k, v in walls.items()}, overhead_us=round(overhead_s * 1e6, 1),
                       reference_pace_us=round(ref_pace_s * 1e6, 3), candidate_pace_us=round(wall_call_s * 1e6, 3),
                       claimed_us=round(claimed_s * 1e6, 3), confirmed=confirmed,
                       fastest_confirmable_us=round(fastest_s * 1e6, 3))
    return result, flags, batch


def fastest_confirmable(pace_s: float, calls: int, ref_walls: dict[str, float], walls: dict[str, float],
                        share: float, slack_s: float = WALL_ABS_S, movable: bool = False) -> tuple[float, float]:
    """bound_timing's test solved for the claim: (the fastest event time a candidate whose batch ran at `pace_s` a
    call would have had confirmed, the seconds of its prepare and commit still excused). `movable`: a batch from
    before its input file was masked and its outputs digested, when a runner could move its calls' work into that
    room unseen (their file transfers' share: tens of ms where the calls took one)."""
    room_s = sum(max(0.0, ref_walls[p] * share * (1 + PHASE_TOL) + PHASE_ABS_S - walls[p])
                 for p in ("prepare", "commit"))
    return max(0.0, pace_s - (slack_s + (room_s if movable else 0.0)) / calls) / (1 + WALL_TOL), room_s


def _scaled(stats: TimingStats, factor: float) -> TimingStats:
    return TimingStats.from_samples([s * factor for s in stats.samples_ms])
