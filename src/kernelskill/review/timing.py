"""Timing a forward the way Triton's do_bench does, with the guards a reviewer needs.

Per timed sample, outside the timed region: one of several input sets is copied into each of the fixed input buffers
the sample uses (the same pointers see different contents from call to call, which defeats caching by pointer, shape
or call count), the L2 cache is flushed by zeroing a persistent buffer larger than it, and (prefill) the device is
kept busy while the host enqueues the sample. Inside: one CUDA event pair on the current stream around one call, or,
where the reference's calls take under SMALL_CALL_S, a group of back-to-back calls on their own buffers (the same
group for every callable); then the whole device is synchronized and a third event marks when it was idle. When a
callable's stop event comes clearly before its device is idle (work hidden on side streams or threads), every
callable is scored by the idle-device times instead, so hidden work is counted. Before each timed loop the
persisting L2 is reset, so no access policy window survives the flush. All samples are kept. Under the graphed
protocol, a sample's calls shorter than GRAPH_BELOW_S are captured once per loop as a CUDA graph and each sample
replays it (graphed.py), where every callable's replay gives what its eager calls gave.
Reference and candidate are timed in the same process, interleaved in blocks, under the same conditions.
"""

from __future__ import annotations

import ctypes
import functools
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, TypeVar

import torch

from kernelskill.review.graphed import GroupGraph, capture_groups

T = TypeVar("T")
L2_FLUSH_BYTES = 256 * 1024 * 1024  # well above the H200's 50 MB (and any current GPU's) L2
# The timed loop of all callables together aims at this many seconds: a candidate whose every call takes seconds (one
# that retries a failing build on each forward took 5 s a call) gets fewer timed calls, never fewer than MIN_ITERS,
# instead of holding the GPU for the whole time stage. Warm-up stops after a quarter of it. At 30 s, slow candidates
# set a bench's pace: on the H100 a KernelBenchLeaderboard LayerNorm 70x slower than its reference held the GPU 47 s
# (33 s in this loop), seven of 63 cold reviews held it over 10 s and the mean hold was 5.7 s against a median of
# 3.4 s. A loop that long is made of calls of tens of milliseconds, whose samples vary by a percent or less: 10 s
# still gives each side dozens of them.
TIMING_BUDGET_S = 10.0
MIN_ITERS = 10
# A CUDA call shorter than this is timed in groups of back-to-back calls per event pair (group_size): at 10 µs the
# events' ~0.5 µs resolution and the launch jitter of a single call are several percent of a sample; a group of 50 µs
# or more brings them under 1%. MAX_GROUP bounds the extra input buffers (one per call of a group). The group is sized
# from the reference's calls, the same in every review of a task: sized from the faster side, a candidate whose calls
# took 44-50 us was timed 1 call per sample in some reviews and 2 in others (the second finds L2 warm), and its
# speedup moved 7% between reviews (CUDA-L1's L2/41 on the H200, docs/h200/timing).
SMALL_CALL_S = 50e-6
# The graphed protocol replays the calls of callables shorter than this on the GPU (the `group_by` callable's warm-up
# calls, as for the group): a graph saves launch work, a few microseconds a kernel, which is noise in a longer call
# (and a graph's memory pool holds a second copy of a call's outputs and intermediates)
GRAPH_BELOW_S = 1e-3
MAX_GROUP = 32
CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06  # cudaLimitPersistingL2CacheSize
# Prefill (the robust protocol): before a sample's start event the stream gets a spin kernel long enough for the host
# to enqueue the whole sample behind it, so the events time the GPU running the calls back to back, not the host
# launching them. Measured on the H200 (docs/h200/timing): a 5 us kernel's samples spread 2-3 % without it and
# 0.4-0.7 % with it; in groups of 16 without it the figure was the host's launch rate (9.4 us a call for 2.7 us of
# GPU time). The spin lasts PREFILL_FACTOR times the host's median time to enqueue a sample, within these bounds.
PREFILL_MIN_S = 100e-6
# Long enough for a forward that takes the host 30 ms to launch (DenseNet121 and SwinMLP on the H200 spread 1.02-1.03
# between reviews behind a 5 ms cap, 1.000 behind this one)
PREFILL_MAX_S = 0.1
PREFILL_FACTOR = 3.0
# A launch sequence of milliseconds varies less, relative to its length, than one of microseconds: past 2 ms of
# enqueueing the spin is 1.5 times the host's time plus PREFILL_MARGIN_S (both 6 ms at 2 ms), so DenseNet121, whose
# forward took the host 22 ms to enqueue on the H200, spins 36 ms before each sample, not 66 ms
PREFILL_LONG_FACTOR = 1.5
PREFILL_MARGIN_S = 3e-3
# The ungrouped protocol times one call per event pair behind the same spin. Measured on the H200 (docs/h200/timing):
# it fixed the group flip but spread 1.06-1.13 on a 7 us conv1d, whose single cold calls vary from review to review
# where a group of them does not; kept to compare against
# A callable whose launches outlast the spin before more than this share of its warm-up calls cannot be queued ahead
# of the GPU: its forward waits on the device (a host-to-device copy of a Python scalar, an .item(), more launches
# than the queue holds). Spinning first only makes it wait longer (SwinTransformerV2's forward took the host 115-123 ms
# behind a 100 ms spin, and its samples spread 8-35%), so that callable is timed without the spin, as the host runs
# it. The others keep theirs: were the decision shared, a candidate could add a synchronize to its forward and have a
# launch-bound reference timed at its launches' pace (CUDA-L1's L2/41: 6.5x there against 1.16x on the GPU)
UNQUEUED_SHARE = 0.5
SPIN_CLOCK_HZ = 2.0e9  # cycles per second assumed for torch.cuda._sleep; a slower clock only spins longer


def clone_args(args: list) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def group_size(per_call_s: float, threshold_s: float = SMALL_CALL_S, max_group: int = MAX_GROUP) -> int:
    """Calls per event pair for a callable taking `per_call_s` a call: 1 from `threshold_s` on, else enough calls
    for a group to take about `threshold_s`, at most `max_group`."""
    if per_call_s >= threshold_s:
        return 1
    if per_call_s <= 0:
        return max_group
    return max(1, min(max_group, math.ceil(threshold_s / per_call_s)))


def group_for(call_s: dict[str, float], by: str | None, threshold_s: float = SMALL_CALL_S) -> int:
    """Calls per sample from each callable's seconds a call (warm-up): group_size of the `by` callable's calls, or of
    the fastest callable's when `by` is not among them; 1 when nothing was timed."""
    if not call_s:
        return 1
    return group_size(call_s.get(by or "", min(call_s.values())), threshold_s)


def prefill_seconds(host_s: float | None, max_s: float = PREFILL_MAX_S) -> float:
    """How long the spin before a sample lasts, given the host's median seconds to enqueue one sample (None: not
    known yet, as in the first warm-up call), at most `max_s`."""
    if host_s is None:
        return max_s
    cover = min(PREFILL_FACTOR * host_s, PREFILL_LONG_FACTOR * host_s + PREFILL_MARGIN_S)
    return min(max_s, max(PREFILL_MIN_S, cover))


def spin_gpu(seconds: float) -> None:
    """Keep the current stream busy for about `seconds` (torch.cuda._sleep spins for a number of clock cycles)."""
    torch.cuda._sleep(max(1, int(seconds * SPIN_CLOCK_HZ)))


@functools.lru_cache(maxsize=1)
def _cudart():
    """The CUDA runtime torch runs on: torch.cuda.cudart() when it has the two calls, else the libcudart this process
    has loaded (found in /proc/self/maps), through ctypes."""
    rt = torch.cuda.cudart()
    if all(hasattr(rt, n) for n in ("cudaCtxResetPersistingL2Cache", "cudaDeviceSetLimit")):
        return rt
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = [p for line in maps if "/libcudart.so" in (p := line.split()[-1])]
    lib = ctypes.CDLL(paths[0] if paths else "libcudart.so")
    lib.cudaCtxResetPersistingL2Cache.restype = ctypes.c_int
    lib.cudaDeviceSetLimit.restype = ctypes.c_int
    lib.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
    return lib


def reset_persisting_l2() -> None:
    """Evict every persisting L2 line and set the persisting set-aside to 0 bytes, so nothing a callable pinned with
    an access policy window survives the flush. Raises when either call fails (an unsupported device, no runtime)."""
    rt = _cudart()
    for name, args in (("cudaCtxResetPersistingL2Cache", ()),
                       ("cudaDeviceSetLimit", (CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE, 0))):
        code = int(getattr(rt, name)(*args))
        if code != 0:
            raise RuntimeError(f"{name} returned CUDA error {code}")


@dataclass
class LoopInfo:
    """What the last Timer.run did besides the samples."""

    iters: int = 0  # samples per callable
    group: int = 1  # calls per sample
    loop_s: float = 0.0  # wall seconds of the timed loop, warm-up excluded
    l2_reset_error: str | None = None  # why resetting the persisting L2 failed; None when it worked or was not needed
    prefill_s: dict[str, float] = field(default_factory=dict)  # per callable: the spin before its timed samples
    host_ms: dict[str, float] = field(default_factory=dict)  # per callable: median host ms to enqueue one call
    # per callable: timed samples whose enqueueing outlasted the spin before them (the launch queue filled, or the
    # host was descheduled), so the GPU waited on the host for part of the sample
    outrun: dict[str, int] = field(default_factory=dict)
    # callables whose warm-up launches outlasted their spin (UNQUEUED_SHARE): those were timed without the spin
    unqueued: list[str] = field(default_factory=list)
    graphed: list[str] = field(default_factory=list)  # callables whose samples replayed a captured group (graphed)
    graph_error: str | None = None  # why the graphed protocol's capture was not used: every side is timed eagerly


class Timer:
    """Times callables on one device. `block` iterations of each callable alternate until `iters` are done.

    `l2_reset` runs once per timed loop, after the warm-up and before the samples; on CUDA it defaults to
    reset_persisting_l2, on CPU to nothing. A failure is recorded in `info.l2_reset_error`, never raised.

    `prefill`: before each sample's start event, `spin(seconds)` keeps the device busy while the host enqueues the
    sample (prefill_seconds of the host's median time to enqueue one of its calls so far, times the calls in the
    sample); `spin` defaults to spin_gpu on CUDA. The spin is outside the timed region; the host's median time to
    enqueue one call is kept in `info.host_ms`."""

    def __init__(self, device: torch.device, device_sync: bool = True, poison: Callable[[], object] | None = None,
                 after_call: Callable[[str], object] | None = None, l2_reset: Callable[[], object] | None = None,
                 small_call_s: float = SMALL_CALL_S, prefill: bool = False,
                 spin: Callable[[float], object] | None = None, prefill_max_s: float = PREFILL_MAX_S,
                 group_by: str | None = "reference", graphs: bool = False):
        self.device = device
        self.cuda = device.type == "cuda"
        self.device_sync = device_sync
        self.poison = poison  # called before each block, outside the timed region
        self.after_call = after_call  # called with the callable's name after each call, outside the timed region
        self.l2_reset = l2_reset if l2_reset is not None else (reset_persisting_l2 if self.cuda else None)
        self.small_call_s = small_call_s
        self.prefill = prefill
        self.prefill_max_s = prefill_max_s
        self.spin = spin if spin is not None else (spin_gpu if self.cuda else None)
        self.host_s: dict[str, list[float]] = {}  # per callable: host seconds to enqueue one call, sample by sample
        self.last_prefill_s = 0.0
        self.last_outrun = False  # the last sample's enqueueing outlasted its spin
        self.group_by = group_by  # the callable whose warm-up calls size the group (absent: the fastest)
        self.graphs = graphs  # the graphed protocol: a sample's group captured once per loop and replayed (graphed.py)
        self.graphed: dict[str, GroupGraph] = {}
        self.graph_calls = False  # set by a run's warm-up (GRAPH_BELOW_S); kept by a later run without one (a re-time)
        self.unqueued: list[str] = []  # set by a run's warm-up; kept by a later run without one (a re-time)
        self.info = LoopInfo()
        n = L2_FLUSH_BYTES if self.cuda else 32 * 1024 * 1024
        self.flush_buffer = torch.empty(n // 4, dtype=torch.int32, device=device)

    def _prefill(self, name: str, calls: int) -> float:
        """The spin before a sample of `calls` calls of `name` (0 without prefill); run outside the timed region."""
        if not self.prefill or self.spin is None or name in self.unqueued:
            return 0.0
        seen = self.host_s.get(name)
        seconds = prefill_seconds(statistics.median(seen[-20:]) * calls if seen else None, self.prefill_max_s)
        self.spin(seconds)
        return seconds

    def _one(self, fn: Callable, calls: list[tuple[list, list]], name: str = "") -> tuple[float, float, object]:
        """One timed group of back-to-back calls, each (input set, its own buffer): (ms per call by the stream's
        events, ms per call until the whole device was idle, the last call's output). The inputs are copied and the
        L2 flushed once, before the group; with prefill the device is then kept busy while the group is enqueued."""
        fresh = []
        graph = self.graphed.get(name)
        if graph is not None and (len(calls) != len(graph.buffers)
                                  or any(slot is not b for (_, slot), b in zip(calls, graph.buffers))):
            graph = None  # not the buffers it was captured on (never, as run() draws them): called eagerly
        for args, slot in calls:
            for dst, src in zip(slot, args):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
            fresh.append(slot)
        self.flush_buffer.zero_()
        n = len(fresh)
        self.last_prefill_s = self._prefill(name, n)
        if self.cuda:
            start, end, idle = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            start.record()
            t0 = time.perf_counter()
            if graph is not None:
                out = graph.replay()
            else:
                for a in fresh:
                    out = fn(*a)
            enqueued = time.perf_counter() - t0
            self.host_s.setdefault(name, []).append(enqueued / n)
            self.last_outrun = bool(self.last_prefill_s) and enqueued > self.last_prefill_s
            end.record()
            if self.device_sync:
                # Everything the call issued, on any stream, is done after this; the third event therefore bounds the
                # true cost (plus the host's wake-up latency, which is why it is not the default figure).
                torch.cuda.synchronize(self.device)
                idle.record()
                idle.synchronize()
                return start.elapsed_time(end) / n, start.elapsed_time(idle) / n, out
            end.synchronize()
            ms = start.elapsed_time(end) / n
            return ms, ms, out
        t0 = time.perf_counter()
        for a in fresh:
            out = fn(*a)
        elapsed = time.perf_counter() - t0
        self.host_s.setdefault(name, []).append(elapsed / n)
        self.last_outrun = bool(self.last_prefill_s) and elapsed > self.last_prefill_s
        ms = elapsed * 1e3 / n
        return ms, ms, out

    def run(
        self,
        fns: dict[str, Callable],
        input_sets: list[list],
        warmup: int,
        iters: int,
        block: int = 10,
        keep_last: int = 0,
        budget_s: float | None = TIMING_BUDGET_S,
        group: int | None = None,
    ) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[tuple[int, object]]]]:
        """Time every callable in `fns` on the rotating `input_sets`.

        Returns, per callable, the samples (ms per call) by the stream's events, the samples until the device was
        idle, and the outputs of its last `keep_last` samples (each the last call of its group) as (input set index,
        output) so they can be checked. Every callable gets the same number of samples: `iters`, or fewer (at least
        MIN_ITERS) when the warm-up says the timed loop would take more than `budget_s` (None: no limit). `group`
        calls per sample, the same for every callable; None: on CUDA, group_size of the `group_by` callable's warm-up
        calls (the fastest callable's when there is none), on CPU 1. With prefill, a callable whose warm-up launches
        outlast their spin (UNQUEUED_SHARE) is timed without it, here and in later runs without a warm-up.
        `self.info` says what was done.
        """
        self.info = info = LoopInfo()
        with torch.no_grad():
            slots = [clone_args(input_sets[0]) for _ in range(2)]  # 2 buffers, len(input_sets) >= 3 contents
            per_call: dict[str, float] = {}  # wall seconds of one warm-up call (copy, flush and sync included)
            event_s: dict[str, float] = {}  # the median warm-up call by the clock, the first (compiling) one left out
            outran: dict[str, list[bool]] = {}  # per warm-up call: its launches outlasted the spin before it
            for name, fn in fns.items():
                spent, times = 0.0, []
                for i in range(warmup):
                    t0 = time.perf_counter()
                    ms, _, out = self._one(fn, [(input_sets[i % len(input_sets)], slots[i % 2])], name)
                    del out
                    spent += time.perf_counter() - t0
                    times.append(ms / 1e3)
                    outran.setdefault(name, []).append(self.last_outrun)
                    if self.after_call is not None:
                        self.after_call(name)
                    if budget_s is not None and spent > budget_s / 4 / len(fns):
                        break
                per_call[name] = spent / max(len(times), 1)
                if times:
                    event_s[name] = statistics.median(times[1:] or times)
            if warmup > 0:
                self.graph_calls = bool(event_s) and event_s.get(
                    self.group_by or "", min(event_s.values(), default=1.0)) < GRAPH_BELOW_S
                self.unqueued = [name for name, seen in outran.items()
                                 if sum(seen[1:] or seen) > UNQUEUED_SHARE * len(seen[1:] or seen)]
            info.unqueued = list(self.unqueued)
            if group is None:
                group = group_for(event_s, self.group_by, self.small_call_s) if self.cuda else 1
            info.group = group
            slots += [clone_args(input_sets[0]) for _ in range(group - len(slots))]
            self.graphed = {}
            if self.graphs and self.cuda and self.graph_calls:
                self.graphed, info.graph_error = capture_groups(fns, slots[:group], input_sets, self.device)
                info.graphed = list(self.graphed)
                for name, fn in fns.items() if not self.graphed else ():
                    # a capture empties the allocator's cache: one untimed sample each fills it again, so no timed
                    # sample of the eager calls pays the driver for memory (a millisecond against microseconds)
                    self._one(fn, [(input_sets[c % len(input_sets)], slots[c]) for c in range(group)], name)
                    if self.after_call is not None:
                        self.after_call(name)
            spots = group if self.graphed else len(slots)  # graphed: every sample on the buffers its graph reads
            if budget_s is not None and warmup > 0:
                cost = sum(per_call.values()) * group
                if cost * iters > budget_s:
                    iters = max(min(MIN_ITERS, iters), int(budget_s / cost))
                    keep_last = min(keep_last, iters)
            info.iters = iters
            if self.l2_reset is not None:
                try:
                    self.l2_reset()
                except Exception as exc:  # recorded, not raised: the review goes on and says so
                    info.l2_reset_error = f"{type(exc).__name__}: {exc}"
            samples: dict[str, list[float]] = {name: [] for name in fns}
            synced: dict[str, list[float]] = {name: [] for name in fns}
            kept: dict[str, list[tuple[int, object]]] = {name: [] for name in fns}
            done = 0
            counter = 0  # calls so far, per callable
            t_loop = time.perf_counter()
            while done < iters:
                n = min(block, iters - done)
                for name, fn in fns.items():
                    if self.poison is not None:
                        self.poison()
                    for j in range(n):
                        first = counter + j * group
                        calls = [(input_sets[(first + c) % len(input_sets)], slots[(first + c) % spots])
                                 for c in range(group)]
                        ms, idle_ms, out = self._one(fn, calls, name)
                        if self.last_prefill_s:
                            info.prefill_s[name] = self.last_prefill_s
                            info.outrun[name] = info.outrun.get(name, 0) + self.last_outrun
                        if self.after_call is not None:
                            self.after_call(name)
                        samples[name].append(ms)
                        synced[name].append(idle_ms)
                        if done + j >= iters - keep_last:
                            # a copy: an output that aliases the input buffer would be overwritten by later calls
                            kept[name].append(((first + group - 1) % len(input_sets), _copy_outputs(out)))
                        else:
                            del out
                counter += n * group
                done += n
            if self.cuda:
                torch.cuda.synchronize(self.device)
            info.loop_s = time.perf_counter() - t_loop
            for name in fns:
                host = self.host_s.get(name, [])[-iters:]
                if host:
                    info.host_ms[name] = statistics.median(host) * 1e3
        return samples, synced, kept


def protocol_limits(protocol: str) -> tuple[int | None, float, float]:
    """(calls per sample, seconds a re-time may use, the longest spin before a sample: 0 for none) of a timing
    protocol: robust lets the Timer choose the group, keeps the device busy while a sample is enqueued (up to
    PREFILL_MAX_S) and re-times a noisy loop within TIMING_BUDGET_S; graphed is robust with each sample's group
    replayed from a CUDA graph (`graphs`); ungrouped is robust with one call per sample, each after its own L2
    flush; single times one call per sample, once, as the host launches it."""
    return {"robust": (None, TIMING_BUDGET_S, PREFILL_MAX_S), "graphed": (None, TIMING_BUDGET_S, PREFILL_MAX_S),
            "ungrouped": (1, TIMING_BUDGET_S, PREFILL_MAX_S)}.get(protocol, (1, 0.0, 0.0))


def graphs(protocol: str) -> bool:
    """Whether the protocol replays each sample's group of calls from a CUDA graph captured once per loop (`graphed`:
    robust otherwise, and robust wherever a side cannot be captured or its replay differs from its eager calls):
    launched one by one, a few-microsecond call's GPU time moved 6-10% from process to process on the H100; replayed,
    0.5% (graphed.py)."""
    return protocol == "graphed"


def retime_if_noisy(first: T, noise: Callable[[T], float], again: Callable[[], T], loop_s: float,
                    budget_s: float = TIMING_BUDGET_S) -> tuple[T, bool]:
    """`first`, or a second timed loop (`again`) when `first` is noisy (noise() > 1) and both loops fit in
    `budget_s` (the first took `loop_s`). Of the two, the less noisy is kept, not a pool of both: a disturbance
    that spread one loop would spread the pool as well. (the loop kept, whether a second was timed)"""
    score = noise(first)
    if score <= 1 or 2 * loop_s > budget_s:
        return first, False
    second = again()
    return (second if noise(second) < score else first), True


def hidden_work(samples: list[float], synced: list[float], ref_samples: list[float], ref_synced: list[float]) -> bool:
    """Whether a callable left work running past its stop event (side streams, threads), judged against the
    reference's own gap between the stop event and an idle device (the host's wake-up latency)."""
    gap = statistics.median(synced) - statistics.median(samples)
    ref_gap = statistics.median(ref_synced) - statistics.median(ref_samples)
    return gap > ref_gap + max(0.02, 0.1 * statistics.median(samples))


def _copy_outputs(out):
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_copy_outputs(o) for o in out)
    return out


def plain_event_loop(fn: Callable, args: list, warmup: int = 25, iters: int = 100) -> float:
    """The common published method, kept for comparison: one event pair around a loop on the same inputs, no L2
    flush, no rotation, no device-wide sync. Returns ms per call."""
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn(*args)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / iters
