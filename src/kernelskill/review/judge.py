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
  With GRAPHS on, the candidate's runner, then the reference's where the candidate's says it did, are asked to
  capture their calls as one CUDA graph in `prepare` and replay it in `calls`, where one call, captured and
  replayed, gives the eager call's bytes (worker/judged.capture): a small
  kernel's calls then run at the GPU's pace, against which its event time can be confirmed, instead of at its
  launches' (three times slower for a few microseconds of work), against which none could. The runner's choice
  changes nothing the judge checks: the clock, the digests and the compared outputs are the same either way.
  Before its batch each runner makes, untimed, every allocation its `prepare` and `calls` will make (`reserve`; the
  candidate's before its input file is handed over), so neither side's calls pay the driver for memory the other's
  do not.
  After the batch the candidate's runner is killed, with everything it started; only then does the reference runner,
  idle until now, run its batch, so the two batches are seconds apart (a busy machine, a bench building the next
  candidates, weighs on both alike) and nothing of the candidate's runs beside the reference's. Then the outputs
  of calls the judge picks only now are compared.
  A claim the judge's clock missed by no more than a busy host's hiccup (judge_time.RETRY_EXCESS_S) keeps the device
  for a second review, with fresh runners and a fresh input file (reviewer.review, ReviewSettings.batch_retries):
  each batch is checked whole, so either bounds real work, and what is kept of the two is never a higher figure
  than one of them confirmed (verdict.keep_after_retry).
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.review.exchange import BATCH_INPUTS, hand_over
from kernelskill.review.judge_files import (_compare_files, check_digests, compare_samples,  # noqa: F401
                                            comparing_device)
from kernelskill.review.pinning import CHOOSER, pinned
from kernelskill.review.quiet import BUILDS
from kernelskill.review.turns import Kind, Turn
from kernelskill.review.results import CompileWarmup, JudgeBatch, Mismatch, TimingResult, TimingStats
from kernelskill.review.wire import Command
# the candidate's timing held to the batch, and its constants (re-exported: scripts and tests read them here)
from kernelskill.review.judge_time import (PHASE_ABS_S, PHASE_TOL, REF_SLACK, UNRESOLVED_FACTOR,  # noqa: F401
                                           WALL_ABS_S, WALL_TOL, _stats, bound_timing, fastest_confirmable,
                                           worth_retrying)

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
OVERHEAD_CAP_S = 0.01  # the most of a batch's `calls` part taken for the judge's latency rather than calls
# plus this much per GB of the batch's input file: unmasking it is in the part too (a draw and an XOR pass, about
# 3 GB of device memory traffic a GB: a millisecond at an H200's 4.8 TB/s; 0.5 s on this project's 2-core CI host)
UNMASK_S_PER_GB = {"cuda": 0.005, "cpu": 1.0}
BATCH_PARTS = ("prepare", "calls", "commit")
# The candidate's batch is cut (verdict: timeout) when a part runs past this many times what its calls should take
# at the slower of its own claimed pace and the reference's, plus a floor and a share for the bytes it moves: a
# runner whose calls are 20x slower than its own timing says has no figure to confirm, and an attacker's batch of
# 2000 calls at 20 ms each cost the judge 41.6 s on the H200 before this cut
BATCH_CUT_FACTOR = 20.0
BATCH_CUT_FLOOR_S = 5.0
BATCH_CUT_S_PER_GB = 2.0
# On unless set to "off": both runners capture their batch's calls as one CUDA graph and replay it
# (worker/judged.capture), where one call replays to the eager call's bytes, so a host-bound call's batch runs at the
# GPU's pace and confirms its events. Measured on an H100 (session 18, docs/h200/timing): 36 of 36 reviews of the six
# capturable host-bound tasks confirmed, the trust cases that capture held (6 of 6); "off" is the A/B's other arm
GRAPHS = "KERNELSKILL_BATCH_GRAPH"
# only for calls shorter than this on the GPU (by the reference runner's events): what a graph saves is launch time,
# tens of microseconds a call, and a longer call's batch is short and its outputs large (a graph's memory pool holds
# its outputs beside the blocks `prepare` keeps: 26 GB for CUDA-L1's L2/34, whose calls take milliseconds) ...
GRAPH_BELOW_MS = 1.0
# ... or for a longer call whose launches take at least this share of its GPU time (the reference runner's median
# host time to enqueue one call against its events): there the eager batch's pace is the host's, not the GPU's. On
# the H100 (session 22) KernelBench's L3/29 SwinMLP, 3.9 ms on the GPU and 6-12 ms to launch, left every review's
# events unconfirmed and its figure at the ratio of two processes' launch paces (0.61-1.07x over three reviews of
# one kernel); such calls make hundreds of small launches over small tensors, not L2/34's few large ones
GRAPH_HOST_SHARE = 0.5


@dataclass
class ReferenceRun:
    """What the reference runner produced for one review, and where its files are."""

    folder: Path
    trial_seeds: list[int]
    batch_seeds: list[int]
    stats: TimingStats | None = None  # the reference timed in the reference runner
    graphed_timing: bool = False  # its samples replayed a CUDA graph of its calls (timing_protocol graphed)
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
    said: dict = field(default_factory=dict)  # what its runner says of its batch (calls_s, graph); only "graph" is used
    # (judge_time.bound_timing: the reference runner never ran candidate code, and its timing is taken too)
    graph: bool = False  # whether the candidate's runner is asked to capture its batch's calls as a CUDA graph
    # (GRAPHS); the reference's is asked too where the candidate's says it did
    stateful: bool = False
    cpu: int | None = None  # the CPU both runners' timed work runs on (review/pinning.py), None for none
    pins_refused: list[str] = field(default_factory=list)  # threads that could not be moved there
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
    # its batch left the claim unconfirmed by a margin a busy host's hiccup explains (judge_time.worth_retrying), and
    # the device was kept (`device_done` not called) for a second review
    retry: bool = False


def draw_seeds(n: int) -> list[int]:
    return [secrets.randbits(62) for _ in range(n)]


@contextmanager
def _pinned(worker, ref: ReferenceRun) -> Iterator[None]:
    """The block's commands to `worker` run on the review's timing CPU (pinning.py); threads that could not be
    moved there are kept for the record."""
    with pinned(worker.pid if ref.cpu is not None else None, ref.cpu) as pin:
        yield
    ref.pins_refused += pin.refused


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
                   turn: Turn | None = None, cpu: int | None = None, compiled: bool = False) -> ReferenceRun:
    """Everything the reference runner does for a review, before the candidate runner has run any candidate code.
    Under a `turn`, its timing is a timed step and the rest plain ones; its timing runs on `cpu` (pinning.py), as
    both batches and the candidate runner's timing will. `compiled` (`--baseline compile`): torch.compile(Model) is
    made ready first, in a plain step on every CPU, and timed beside the reference."""
    run = ReferenceRun(folder=folder, trial_seeds=draw_seeds(JUDGE_TRIALS), batch_seeds=[],
                       target_s=BATCH_TARGET_S[device], cpu=cpu)
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
    if compiled:
        with _step(turn, "plain"):
            _, run.seconds["reference_baseline"], error = _run(worker, Command(name="baseline"), limits["time"])
        if error:
            run.error = f"making torch.compile(Model) ready in the reference runner failed: {error}"
            return run
    with _step(turn, "timed"), _pinned(worker, run):
        info, run.seconds["reference_time"], error = _run(worker, Command(name="time_reference", seeds=draw_seeds(3)),
                                                          limits["time"])
    if error:
        run.error = f"timing the reference in its own runner failed: {error}"
        return run
    run.stats = _stats(info.get("reference"))
    run.graphed_timing = bool(info.get("graphed"))
    run.host_ms = info.get("host_ms")
    run.compiled, run.compiled_host_ms = _stats(info.get("compiled_reference")), info.get("compiled_host_ms")
    run.compile_warmup = CompileWarmup.model_validate(info["compile_warmup"]) if info.get("compile_warmup") else None
    run.compile_error = info.get("compile_error")
    if run.stats is None:
        run.error = "the reference runner's timing was not usable"
        return run
    per_call_s = max(run.stats.median_ms, run.host_ms or 0.0) / 1e3
    # a graph replays recorded launches: the batch of a reference whose answers depend on its state stays eager
    launch_bound = (run.host_ms or 0.0) >= GRAPH_HOST_SHARE * run.stats.median_ms
    run.graph = (device == "cuda" and not run.stateful and (run.stats.median_ms < GRAPH_BELOW_MS or launch_bound)
                 and os.environ.get(GRAPHS, "on").strip().lower() != "off")
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


def reference_batch(worker, ref: ReferenceRun, limit: float, graph: bool = False) -> None:
    """The reference's batch, run by its runner (idle since its own part) once the candidate's runner is dead;
    `graph`: captured and replayed as a CUDA graph (worker/judged.capture), where it can be."""
    if worker is None or not worker.alive():
        raise ReferenceFailed("the reference runner was gone before its batch")
    # its allocations made ahead, as the candidate runner's were (worker/judged.reserve)
    _, ref.seconds["reference_reserve"], error = _run(
        worker, Command(name="reserve", seeds=draw_seeds(len(ref.batch_seeds)), reserve_bytes=ref.output_bytes), limit)
    if error:
        raise ReferenceFailed(f"making the reference's batch allocations failed: {error}")
    with BUILDS.quiet(), _pinned(worker, ref):
        ref.batch_walls, error, ref.said = _batch(worker, ref.batch_seeds, ref.folder / "batch", limit,
                                                  ref.output_bytes, ref.mask_key, graph)
    if error:
        raise ReferenceFailed(f"the reference's batch failed: {error}")


def _batch(worker, seeds: list[int], folder: Path, limit: float, reserve_bytes: int, key: int, graph: bool = False
           ) -> tuple[dict[str, float], str | None, dict]:
    """The batch's three parts, each timed by this process's clock and limited to `limit` seconds: ({part: seconds},
    error, what the runner says: its calls loop's seconds (-1: nothing), its calls' digests, whether it replayed
    them as a graph: hints for the record, except the digests, which the judge holds the written outputs to). A part
    that ran past its limit is the last in the dict, with its seconds at or past the limit."""
    walls: dict[str, float] = {}
    said: dict = {"calls_s": -1.0, "digests": None, "graph": None}
    for part in BATCH_PARTS:
        command = Command(name=part, seeds=seeds if part == "prepare" else [],
                          out_dir=None if part == "calls" else str(folder), graph=graph and part == "prepare",
                          reserve_bytes=reserve_bytes if part == "prepare" else 0, key=key if part == "calls" else None)
        info, walls[part], error = _run(worker, command, limit)
        if part == "prepare" and isinstance(info, dict) and graph:
            said["graph"] = info.get("graph") is True
        if part == "calls" and isinstance(info, dict):
            if isinstance(info.get("calls_s"), (int, float)):
                said["calls_s"] = round(float(info["calls_s"]), 6)
            said["digests"] = info.get("digests")
        if error:
            return walls, error, said
    return walls, None, said


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


def candidate_part(worker, ref: ReferenceRun, cand_folder: Path, atol: float, rtol: float,
                   limits: dict[str, float], runner_timing: TimingResult | None, ref_worker=None,
                   device_done: Callable[[], None] | None = None, compare_on: str = "cpu",
                   turn: Turn | None = None, hold_for_retry: bool = False) -> JudgeReport:
    """The judge's trials and batch on a candidate runner that waits for commands; kills the runner at the end.
    `ref_worker`, the reference runner, waits for commands too: it runs the reference's batch after the candidate's
    (raises ReferenceFailed when it cannot), and is killed after it. Outputs are compared on device `compare_on`
    (comparing_device). `device_done` is called once neither runner is left and the outputs are compared: what
    remains (the timing bounded, the files removed) is this process's work on the host, and the device may serve
    the next review meanwhile. Under a `turn` (a device shared with other reviews, turns.py) the two batches, with
    the candidate runner's kill between them, are one timed step; the rest are plain steps. `hold_for_retry`: a
    batch worth retrying (judge_time.worth_retrying) keeps the device (no `device_done`) and says so (`retry`)."""
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
            # the builds of later candidates stopped while the batch runs (quiet.py), the runner on the timing CPU
            with BUILDS.quiet(), _pinned(worker, ref):
                walls, error, said = _batch(worker, ref.batch_seeds[:calls], cand_folder / "batch", cut,
                                            ref.output_bytes, ref.mask_key, ref.graph)
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
            # the reference's batch replays a graph only where the candidate's did, by its word: an eager candidate
            # (a launch on the legacy stream) is held to the reference's eager pace, not its GPU pace (0.11-0.24x
            # for CUDA-L1's L1/67 on the H100, session 17, where eager against eager gave 0.66-1.0x). A runner that
            # replays a graph, says it did not, and under-reports its events so that they go unconfirmed, is put at
            # the reference's eager pace over its GPU pace: the fallback hole of docs/h200/trust session 15 (about
            # 4x on a 1x host-bound kernel), no wider than it was with every batch eager. Its calls' work is real and
            # checked either way
            reference_batch(ref_worker, ref, limits["time"], graph=ref.graph and said.get("graph") is True)
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
            if _stats(runner_timing.candidate.model_dump()) is None:  # bound_timing has nothing to hold
                return _fail(report, "rejected", "the candidate runner's timing samples are not usable (none, more "
                             "than the judge reads, or not all finite and positive)", check="judge:timing-samples")
            report.timing, flags, report.batch = bound_timing(runner_timing, ref, walls, calls)
            report.retry = hold_for_retry and worth_retrying(report.batch)
            if device_done is not None and not report.retry:
                device_done()
            held = sorted(set(picks) | set(secrets.SystemRandom().sample(range(calls), min(DIGEST_CHECKS, calls))))
            why = check_digests(cand_folder / "batch", said["digests"], held, max_bytes * calls, calls)
            if why:
                return _fail(report, "rejected", f"in the judge's batch, {why}: a call's work must be done inside "
                             "the timed calls, not while its outputs are written", check="judge:batch-digests")
            rest = sorted(set(range(calls)) - set(picks)) if not ref.stateful else []
            why, report.mismatch = compare_samples(ref.folder / "batch", cand_folder / "batch", rest, atol, rtol,
                                                   max_bytes, (len(ref.batch_seeds), calls), SAMPLED_ELEMENTS)
            if why:
                return _fail(report, "rejected", f"outputs of calls in a batch timed by the judge differ from the "
                             f"reference ({why}); every call must compute its result", check="judge:batch-samples")
            report.batch.checked_calls, report.batch.digests_checked = picks, len(held)
            report.batch.sampled_calls = len(rest)
            report.batch.runner_calls_s = {"reference": ref.said["calls_s"], "candidate": said["calls_s"]}
            report.batch.graphs = {"reference": ref.said["graph"], "candidate": said["graph"]}
            report.batch.timing_cpu = CHOOSER.describe(ref.cpu) if ref.cpu is not None else None
            report.flags += flags
            if ref.pins_refused:
                report.flags.append(f"timing_cpu_refused: not every thread of the runners could be put on CPU "
                                    f"{ref.cpu} for their timing ({'; '.join(ref.pins_refused[:3])})")
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
