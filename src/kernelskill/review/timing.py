"""Timing a forward the way Triton's do_bench does, with the guards a reviewer needs.

Per timed iteration, outside the timed region: one of several input sets is copied into one of two fixed input
buffers (the same pointers see different contents from call to call, which defeats caching by pointer, shape or
call count) and the L2 cache is flushed by zeroing a persistent buffer larger than it. Inside: one CUDA event pair around the call, and a device-wide
synchronize before the stop event so work hidden on side streams is counted. All samples are kept.
Reference and candidate are timed in the same process, interleaved in blocks, under the same conditions.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # well above the H200's 50 MB (and any current GPU's) L2


def clone_args(args: list) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


class Timer:
    """Times callables on one device. `block` iterations of each callable alternate until `iters` are done."""

    def __init__(self, device: torch.device, device_sync: bool = True, poison: Callable[[], object] | None = None):
        self.device = device
        self.cuda = device.type == "cuda"
        self.device_sync = device_sync
        self.poison = poison  # called before each block, outside the timed region
        n = L2_FLUSH_BYTES if self.cuda else 32 * 1024 * 1024
        self.flush_buffer = torch.empty(n // 4, dtype=torch.int32, device=device)

    def _one(self, fn: Callable, args: list, slot: list | None = None) -> tuple[float, object]:
        if slot is None:
            fresh = clone_args(args)
        else:
            for dst, src in zip(slot, args):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
            fresh = slot
        self.flush_buffer.zero_()
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn(*fresh)
            if self.device_sync:
                torch.cuda.synchronize(self.device)
            end.record()
            end.synchronize()
            return start.elapsed_time(end), out
        t0 = time.perf_counter()
        out = fn(*fresh)
        return (time.perf_counter() - t0) * 1e3, out

    def run(
        self,
        fns: dict[str, Callable],
        input_sets: list[list],
        warmup: int,
        iters: int,
        block: int = 10,
        keep_last: int = 0,
    ) -> tuple[dict[str, list[float]], dict[str, list[tuple[int, object]]]]:
        """Time every callable in `fns` on the rotating `input_sets`.

        Returns the samples (ms) per callable and, per callable, the outputs of its last `keep_last` timed calls as
        (input set index, output) so they can be checked against the reference.
        """
        with torch.no_grad():
            slots = [clone_args(input_sets[0]) for _ in range(2)]  # 2 buffers, len(input_sets) >= 3 contents
            for name, fn in fns.items():
                for i in range(warmup):
                    self._one(fn, input_sets[i % len(input_sets)], slots[i % 2])
            samples: dict[str, list[float]] = {name: [] for name in fns}
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
                        ms, out = self._one(fn, input_sets[k], slots[(counter + j) % 2])
                        samples[name].append(ms)
                        if done + j >= iters - keep_last:
                            # a copy: an output that aliases the input buffer would be overwritten by later calls
                            kept[name].append((k, _copy_outputs(out)))
                        else:
                            del out
                counter += n
                done += n
            if self.cuda:
                torch.cuda.synchronize(self.device)
        return samples, kept


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
