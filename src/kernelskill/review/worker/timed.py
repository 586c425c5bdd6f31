"""The time stage: reference, candidate (and torch.compile's reference, when asked for) timed on rotated input
sets, the timed outputs checked too, and a suspiciously large speedup re-verified on fresh inputs."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from kernelskill.review.results import TimingResult
from kernelskill.review.worker.baseline import ready_baseline
from kernelskill.review.worker.checks import map_tensors, marginal
from kernelskill.review.worker.session import Verdict
from kernelskill.review.worker.candidate import is_cuda_fatal
from kernelskill.review.worker.verify import candidate_first, one_trial, poison

if TYPE_CHECKING:
    from kernelskill.review.worker.stages import Worker

OUTRUN_SHARE = 0.1  # more than this share of a callable's samples outran their spin: flagged


def time_stage(w: Worker) -> None:
    w.log.stage("time")
    from kernelskill.review.compare import compare_outputs
    from kernelskill.review.results import TimingStats
    from kernelskill.review.paced import compile_host_paced, host_paced
    from kernelskill.review.timing import (PREFILL_MAX_S, SMALL_CALL_S, TIMING_BUDGET_S, Timer, graphs, hidden_work,
                                           protocol_limits, retime_if_noisy)

    seeds = w.req.seeds
    device = w.device.type
    warmup = w.req.warmup
    iters = w.req.iters
    sets = [w.make_inputs(s) for s in seeds.timing]
    expected = [map_tensors(w.run_reference(w.copy_args(args)), lambda t: t.detach().clone()) for args in sets]
    # The timed candidate call is the bare forward: synchronizing inside it would put the host's wake-up latency
    # (tens of microseconds, varying from process to process) into the candidate's time and not the reference's.
    # The Timer synchronizes the whole device after the stop event; the checks run after that, untimed.
    fns = {"reference": lambda *a: w.run_reference(list(a)), "candidate": lambda *a: w.candidate.call(list(a))}
    warmed = None
    if w.settings.baseline == "compile" and not w.req.judged:
        # judged, the reference runner times it (worker/judged.time_reference): a process that ran the candidate is
        # never trusted with a baseline. Unjudged (the guard off), here, before the timer: a first call's compile
        # seconds counted as a warm-up call's cost would cut every side's samples to the minimum
        compiled, warmed, failed = ready_baseline(w)
        if compiled is not None:
            fns["compiled_reference"] = compiled
        else:
            w.flags.add(f"compile_baseline_failed: torch.compile(Model) raised {failed}")
    threads = set(threading.enumerate())  # after the compile: Inductor's compile workers are not the candidate's

    def after_call(name: str) -> None:
        nonlocal threads
        if name == "candidate":
            w.candidate.sync()
            w.candidate.check_threads(threads)
        else:  # threads the harness's own callables start (torch.compile's workers) are not the candidate's
            threads = set(threading.enumerate())

    group, retime_budget, prefill_max_s = protocol_limits(w.settings.timing_protocol)
    timer = Timer(w.device, device_sync=w.guards.device_sync, poison=lambda: poison(w), after_call=after_call,
                  prefill=prefill_max_s > 0, prefill_max_s=prefill_max_s or PREFILL_MAX_S,
                  graphs=graphs(w.settings.timing_protocol))
    with _cuda_errors(w):
        samples, synced, kept = timer.run(fns, sets, warmup, iters,
                                          keep_last=len(sets) if w.guards.timed_outputs else 0,
                                          group=group)
    first = timer.info
    hidden = w.guards.device_sync and device == "cuda" and hidden_work(
        samples["candidate"], synced["candidate"], samples["reference"], synced["reference"])
    if hidden:
        samples = synced
        w.flags.add("work_outside_current_stream")
    w.candidate.check_integrity()
    # A reference whose own timed outputs differ from what it gave for the same inputs before the loop keeps state
    # across calls (KernelBench's VanillaRNN holds its hidden state): the candidate, called a different number of
    # times by then, cannot be held to either answer, so the check is skipped and said so. Verification compared
    # both in lockstep, from the same initial state.
    again = [compare_outputs(expected[k], out, w.settings.atol, w.settings.rtol, -1)
             for k, out in kept.get("reference", [])]
    stateful = any(not c.ok and not marginal(c) for c in again)  # not a reduction's rounding at the tolerance's edge
    if stateful:
        w.flags.add("stateful_reference: the reference's outputs change from call to call, so the timed calls' "
                    "outputs were not compared")
    for k, out in kept["candidate"] if not stateful else ():
        cmp = compare_outputs(expected[k], out, w.settings.atol, w.settings.rtol, -1)
        if not cmp.ok and marginal(cmp):
            # a few elements at the tolerance's edge (a reduction's order varying from call to call), not a
            # result computed for other inputs, which misses in nearly every element
            w.flags.add(f"timed_outputs_marginal: {cmp.mismatch.reason}")
        elif not cmp.ok:
            raise w.log.reject("runtime:timed-outputs",
                              f"outputs of timed calls differ from the reference ({cmp.mismatch.reason}); results "
                              "must be computed on every call, not cached across calls")
    # A noisy loop is timed once more, the same way (same samples, group and callables; no warm-up, they are
    # warm) and the quieter loop kept; a replayed one also when a few slow samples moved a mean more than
    # MAX_REPLAYED_SKEW. The timed outputs were checked on the first.
    def noise(s: dict[str, list[float]]) -> float:
        return TimingResult.retime_noise({n: TimingStats.from_samples(s[n]) for n in ("reference", "candidate")},
                                         replayed=bool(first.graphed))

    with _cuda_errors(w):
        loop, retimed = retime_if_noisy(
            samples, noise, lambda: timer.run(fns, sets, 0, first.iters, budget_s=None, group=first.group)[
                1 if hidden else 0], first.loop_s, budget_s=retime_budget)
    if retimed:
        w.candidate.check_integrity()
    l2_errors = sorted({i.l2_reset_error for i in (first, timer.info) if i.l2_reset_error})
    if l2_errors:
        w.flags.add(f"l2_persisting_reset_failed: {l2_errors[0]}")
    if retimed:
        w.flags.add("timing_retimed: the first timed loop was noisy (or, replayed from graphs, a few slow samples "
                    f"moved a mean more than {TimingResult.MAX_REPLAYED_SKEW:.0%}); kept the "
                    + ("second" if loop is not samples else "first, the second was noisier"))
    stats = {name: TimingStats.from_samples(v) for name, v in loop.items()}
    ref, cand = stats["reference"], stats["candidate"]
    timed, group = first.iters, first.group
    cut = (f" (cut from {iters}: the calls are too slow for {iters} within the timed loop's "
           f"{TIMING_BUDGET_S:.0f} s)" if timed < iters else "")
    if cut:
        w.flags.add("timing_calls_cut")
    grouped = (f"; calls under {SMALL_CALL_S * 1e6:.0f} µs: {group} back-to-back calls per event pair, each on its "
               "own input buffer, the copy and flush once before the group" if group > 1 else "")
    info = timer.info
    graphed = ("; each sample's calls replayed from a CUDA graph of them, captured once per loop and checked "
               "against the same calls made eagerly" if info.graphed else
               f"; the graphed protocol's capture was not used ({info.graph_error}): calls launched one by one"
               if info.graph_error else "")
    prefilled = ("; before each start event the device spins (torch.cuda._sleep) while the host enqueues the "
                 "sample, so the events time the GPU, not the launches" if device == "cuda" and info.prefill_s else "")
    host_us = {n: round(ms * 1e3, 3) for n, ms in info.host_ms.items()} or None
    outrun = {n: k for n, k in info.outrun.items() if k}  # an unspun callable has none
    for name, k in outrun.items():
        if k > OUTRUN_SHARE * timed:
            w.flags.add(f"spin_outrun: the {name}'s launches outlasted the spin before {k} of {timed} samples, so "
                        "those samples include time the GPU waited on the host")
    unqueued = [n for n in first.unqueued if n in ("reference", "candidate")]
    if device == "cuda" and unqueued:
        who = " and the ".join(unqueued)
        prefilled += (f"; the {who} could not be queued ahead of the GPU (its launches outlasted the spin before most "
                      "warm-up calls: the forward waits on the device), so it is timed without the spin, as the "
                      "host runs it")
        w.flags.add(f"host_synchronized: the {who}'s launches could not be queued ahead of the GPU (a host-device "
                    "copy or sync inside the forward, or more launches than the queue holds); timed as the host runs "
                    "it, so host speed is part of its time")
    paced, paced_flags = (host_paced(ref.median_ms, info.host_ms.get("reference"), cand.median_ms,
                                     info.host_ms.get("candidate")) if info.prefill_s else (None, []))
    w.flags.update(paced_flags)
    timing = TimingResult.of(
        ref, cand,
        clock="cuda_events" if device == "cuda" else "cpu_perf_counter",
        method=(
            f"up to {warmup} warm-up + {timed} timed samples each{cut}, interleaved in blocks of 10"
            + "; before each sample one of "
            + f"{len(sets)} input sets is copied into one of {max(2, group)} fixed input buffers and "
            + (("the L2 cache is flushed (256 MB zeroed) and before each loop the persisting L2 reset; CUDA events "
                "on the current stream"
                + ("; the candidate left work running past its stop event, so all callables are timed until the "
                   "device is idle" if hidden else ", checked against device-wide idle time")
                if w.guards.device_sync else ", no device-wide check")
               if device == "cuda" else "a 32 MB buffer is zeroed; CPU wall clock (not a GPU timing)")
            + grouped + graphed + prefilled
            + (f"; torch.compile(Model) was called once before the loop ({warmed.seconds:.1f} s: "
               f"{warmed.cache_words()})" if warmed else "")
            + ("; timed twice (the first loop was noisy), the quieter loop kept" if retimed else "")
        ),
        warmup=warmup,
        iters=timed,
        retimed=retimed,
        group=group,
        prefill_us=round(max(info.prefill_s.values()) * 1e6, 1) if info.prefill_s else None,
        host_us=host_us,
        spin_outrun=outrun or None,
        speedup_host_paced=paced,
    )
    if timing.noisy:
        w.flags.add(f"noisy_timing: {timing.noisy_reason}")
    update = {"ref_ms": ref.mean_ms, "candidate_ms": cand.mean_ms, "speedup": timing.speedup}
    if "compiled_reference" in stats:
        comp = stats["compiled_reference"]
        timing.compiled_reference = comp
        timing.compile_warmup = warmed
        timing.speedup_vs_compile = comp.mean_ms / cand.mean_ms
        if info.prefill_s:
            timing.speedup_vs_compile_host_paced, bound = compile_host_paced(
                comp.median_ms, info.host_ms.get("compiled_reference"), cand.median_ms, info.host_ms.get("candidate"))
            w.flags.update([bound] if bound else [])
        update.update(compile_ms=comp.mean_ms, speedup_vs_compile=timing.speedup_vs_compile)
    w.log.update(timing=timing, flags=sorted(w.flags), output_bytes=w.output_bytes, **update)
    suspicious = timing.suspect_speedup()
    if suspicious > w.settings.reverify_above:
        reverify(w, suspicious)
    w.log.end_stage()


@contextlib.contextmanager
def _cuda_errors(w: Worker):
    """An asynchronous CUDA error surfacing at the timer's synchronization is the candidate's crash."""
    try:
        yield
    except Verdict:
        raise
    except Exception as exc:
        if is_cuda_fatal(exc):
            raise w.log.fail("crash", f"CUDA error while timing the candidate: {type(exc).__name__}: {exc}")
        raise


def reverify(w: Worker, speedup: float) -> None:
    """Suspiciously large speedups get many more trials on fresh inputs before they are believed."""
    seeds = w.req.seeds.reverify
    for i, seed in enumerate(seeds):
        cmp, _ = one_trial(w, 1000 + i, seed, candidate_first(w), False)
        if not cmp.ok:
            w.flags.add(f"speedup_over_{w.settings.reverify_above:g}x_reverify_failed")
            raise w.log.fail("mismatch", f"speedup {speedup:.1f}x re-verified: extra trial {i + 1} of {len(seeds)} failed: "
                            f"{cmp.mismatch.reason}")
    w.flags.add(f"speedup_over_{w.settings.reverify_above:g}x_reverified")
    w.log.update(flags=sorted(w.flags))
