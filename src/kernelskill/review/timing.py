"""Timing a forward the way Triton's do_bench does, with the guards a reviewer needs.

Per timed iteration, outside the timed region: one of several input sets is copied into one of two fixed input
buffers (the same pointers see different contents from call to call, which defeats caching by pointer, shape or
call count) and the L2 cache is flushed by zeroing a persistent buffer larger than it. Inside: one CUDA event pair around the call on the current stream; then
the whole device is synchronized and a third event marks when it was idle. When a callable's stop event comes
clearly before its device is idle (work hidden on side streams or threads), every callable is scored by the
idle-device times instead, so hidden work is counted. All samples are kept.
Reference and candidate are timed in the same process, interleaved in blocks, under the same conditions.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # well above the H200's 50 MB (and any current GPU's) L2
# The timed loop of all callables together aims at this many seconds: a candidate whose every call takes seconds (one
# that retries a failing build on each forward took 5 s a call) gets fewer timed calls, never fewer than MIN_ITERS,
# instead of holding the GPU for the whole time stage. Warm-up stops after a quarter of it.
TIMING_BUDGET_S = 30.0
MIN_ITERS = 10


def clone_args(args: list) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


class Timer:
    """Times callables on one device. `block` iterations of each callable alternate until `iters` are done."""

    def __init__(self, device: torch.device, device_sync: bool = True, poison: Callable[[], object] | None = None,
                 after_call: Callable[[str], object] | None = None):
        self.device = device
        self.cuda = device.type == "cuda"
        self.device_sync = device_sync
        self.poison = poison  # called before each block, outside the timed region
        self.after_call = after_call  # called with the callable's name after each call, outside the timed region
        n = L2_FLUSH_BYTES if self.cuda else 32 * 1024 * 1024
        self.flush_buffer = torch.empty(n // 4, dtype=torch.int32, device=device)

    def _one(self, fn: Callable, args: list, slot: list | None = None) -> tuple[float, float, object]:
        """One timed call: (ms by the stream's events, ms until the whole device was idle, output)."""
        if slot is None:
            fresh = clone_args(args)
        else:
            for dst, src in zip(slot, args):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
            fresh = slot
        self.flush_buffer.zero_()
        if self.cuda:
            start, end, idle = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            start.record()
            out = fn(*fresh)
            end.record()
            if self.device_sync:
                # Everything the call issued, on any stream, is done after this; the third event therefore bounds the
                # true cost (plus the host's wake-up latency, which is why it is not the default figure).
                torch.cuda.synchronize(self.device)
                idle.record()
                idle.synchronize()
                return start.elapsed_time(end), start.elapsed_time(idle), out
            end.synchronize()
            ms = start.elapsed_time(end)
            return ms, ms, out
        t0 = time.perf_counter()
        out = fn(*fresh)
        ms = (time.perf_counter() - t0) * 1e3
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
    ) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[tuple[int, object]]]]:
        """Time every callable in `fns` on the rotating `input_sets`.

        Returns, per callable, the samples (ms) by the stream's events, the samples until the device was idle, and
        the outputs of its last `keep_last` timed calls as (input set index, output) so they can be checked. Every
        callable gets the same number of samples: `iters`, or fewer (at least MIN_ITERS) when the warm-up says the
        timed loop would take more than `budget_s` (None: no limit).
        """
        with torch.no_grad():
            slots = [clone_args(input_sets[0]) for _ in range(2)]  # 2 buffers, len(input_sets) >= 3 contents
            per_call: dict[str, float] = {}  # wall seconds of one warm-up call (copy, flush and sync included)
            for name, fn in fns.items():
                spent, calls = 0.0, 0
                for i in range(warmup):
                    t0 = time.perf_counter()
                    self._one(fn, input_sets[i % len(input_sets)], slots[i % 2])
                    spent += time.perf_counter() - t0
                    calls += 1
                    if self.after_call is not None:
                        self.after_call(name)
                    if budget_s is not None and spent > budget_s / 4 / len(fns):
                        break
                per_call[name] = spent / max(calls, 1)
            if budget_s is not None and warmup > 0:
                cost = sum(per_call.values())
                if cost * iters > budget_s:
                    iters = max(min(MIN_ITERS, iters), int(budget_s / cost))
                    keep_last = min(keep_last, iters)
            samples: dict[str, list[float]] = {name: [] for name in fns}
            synced: dict[str, list[float]] = {name: [] for name in fns}
            kept: dict[str, list[tuple[int, object]]] = {name: [] for name in fns}
            done = 0
            counter = 0
            while done < iters:
                n = min(block, iters - done)
                for name, fn in fns.items():
                    if self.poison is not None:
                        self.poison()
                    for j in range(n):
                        k = (counter + j) % len(input_sets)
                        ms, idle_ms, out = self._one(fn, input_sets[k], slots[(counter + j) % 2])
                        if self.after_call is not None:
                            self.after_call(name)
                        samples[name].append(ms)
                        synced[name].append(idle_ms)
                        if done + j >= iters - keep_last:
                            # a copy: an output that aliases the input buffer would be overwritten by later calls
                            kept[name].append((k, _copy_outputs(out)))
                        else:
                            del out
                counter += n
                done += n
            if self.cuda:
                torch.cuda.synchronize(self.device)
        return samples, synced, kept


def hidden_work(samples: list[float], synced: list[float], ref_samples: list[float], ref_synced: list[float]) -> bool:
    """Whether a callable left work running past its stop event (side streams, threads), judged against the
    reference's own gap between the stop event and an idle device (the host's wake-up latency)."""
    import statistics

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
