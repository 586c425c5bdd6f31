"""A timed sample's calls captured once as a CUDA graph and replayed (the `graphed` timing protocol), for calls
shorter than timing.GRAPH_BELOW_S.

Why: on the H100, one process times torch's tanh on 16 x 16384 floats at one level in every buffer it is given,
but the level moves by 5.6-10% from process to process when the calls are launched one by one (2.74-2.90 us a call
over six processes), and by 0.5% when the same group is replayed from a graph (2.136-2.147 us)
(scripts/device/placement_probe.py, docs/h200/timing session 21). Launched one by one, the GPU's cost per call
carries something of the process's launch path; replayed, the calls run at the GPU's pace. A review's two sides of
a few microseconds each then share one pace instead of each drawing its own.

In reviews (session 21, H100, four host-bound level-1 tasks, 3 reviews quiet and 3 busy each, side by side): the
spread of each task's figure 1.001-1.011 graphed, 1.001-1.101 launched one by one (robust: 1 task of 4 within 1.05).

Each callable's group (one call or several) is captured with call c on the Timer's input buffer c, on the
per-thread default stream (a launch on the legacy default stream during the capture fails it instead of running
outside the graph), and kept only where one replay gives what the same calls gave eagerly on the same contents, the
capture having been made on other contents (a launch that escaped the capture would have left the right outputs
for a replay that computed nothing). "What they gave" allows a kernel's own run-to-run rounding (REPLAY_RTOL), so a
kernel that sums with atomics is graphed too. Every side is graphed or none is: the two sides of a ratio are timed
alike. The outputs of the timed calls that the time stage checks are those of replays. A candidate that cannot be
captured is timed launched one by one, and the judge then holds it against the reference runner's own figure,
which is a graph's where the reference captures (judge_time.bound_timing: conservative, never in its favour).

Each callable's first capture is of one call alone, and the group is captured only after that one succeeded: a
capture that a launch on the legacy stream has invalidated fails the next operation inside it, which in a group is
the next call's own work (an allocation, a copy), half-way through the candidate's code. Whatever fails, every
capture here and in the judge's batch (worker/judged.py) goes through `capturing`, which puts the process back as
it was: a failed capture had left the GPU's random generator marked as capturing, and CUDA-L1's L1/32 HardTanh (a
clone, then a kernel on the legacy stream) then failed the judge's trials on inputs its runner had to make on the
CPU (docs/h200/kernelbench, sessions 23 and 24, H100).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from kernelskill.review.worker.checks import map_tensors


@dataclass
class GroupGraph:
    """One callable's group of calls as a graph: `buffers` are the input buffers it reads, in call order, and `out`
    the last call's output, which every replay rewrites in place."""

    graph: Any
    buffers: list[list]
    out: Any

    def replay(self) -> Any:
        self.graph.replay()
        return self.out


def capture_groups(fns: dict[str, Callable], buffers: list[list], input_sets: list[list],
                   device: torch.device) -> tuple[dict[str, GroupGraph], str | None]:
    """Every callable's group (call c reads buffers[c]) as a graph whose replay gives what its eager calls gave, or
    none, with why not."""
    if len(input_sets) < 2:
        return {}, "fewer than two input sets to check a replay against"
    graphs: dict[str, GroupGraph] = {}
    for name, fn in fns.items():
        try:
            graph, why = _capture(fn, buffers, input_sets, device)
        except Exception as exc:  # noqa: BLE001 - the calls are timed eagerly instead, where an error counts
            graph, why = None, f"{type(exc).__name__}: {str(exc)[:300]}"
        if graph is None:
            return {}, f"the {name}'s calls: {why}"
        graphs[name] = graph
    return graphs, None


def _fill(buffers: list[list], input_sets: list[list], shift: int) -> None:
    for c, slot in enumerate(buffers):
        for dst, src in zip(slot, input_sets[(c + shift) % len(input_sets)]):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)


def _tensors(value) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    map_tensors(value, found.append)
    return found


# A replay's floating-point outputs may differ from the eager calls' by a kernel's own run-to-run rounding (atomics
# summing in another order); a replay that computed nothing, or for other inputs, misses by the inputs' whole spread
REPLAY_RTOL = REPLAY_ATOL = 1e-3


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(torch.allclose(a, b, rtol=REPLAY_RTOL, atol=REPLAY_ATOL, equal_nan=True))
    return bool(torch.equal(a, b))


def _exact(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))


def _eager(fn: Callable, buffers: list[list], input_sets: list[list], shift: int, stream, current) -> list:
    """The group's outputs made eagerly on the capture's stream (torch's warm-up before a capture), copied."""
    out = None
    _fill(buffers, input_sets, shift)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        for args in buffers:
            out = fn(*args)
        made = [t.detach().clone() for t in _tensors(out)]
    current.wait_stream(stream)
    return made


def _capture(fn: Callable, buffers: list[list], input_sets: list[list],
             device: torch.device) -> tuple[GroupGraph | None, str | None]:
    current = torch.cuda.current_stream(device)
    stream = torch.cuda.ExternalStream(2, device=device)  # cudaStreamPerThread: ordered with the legacy stream
    wanted = _eager(fn, buffers, input_sets, 0, stream, current)
    other = _eager(fn, buffers, input_sets, 1, stream, current)
    # Where the two input sets' outputs agree to the tolerance (a large mean, a constant), the tolerance could not
    # tell a replay that computed nothing from one that did: there the replay must match to the byte
    same = _same if len(other) != len(wanted) or any(not _same(a, b) for a, b in zip(other, wanted)) else _exact
    why = _capture_one(fn, buffers[0], stream, device)
    if why:
        return None, why
    out = None
    graph = torch.cuda.CUDAGraph()
    with capturing(torch, graph, stream, device):  # captured on the other set's contents ...
        for args in buffers:
            out = fn(*args)
    _fill(buffers, input_sets, 0)  # ... replayed on the first's
    graph.replay()
    torch.cuda.synchronize(device)
    got = _tensors(out)
    if len(got) != len(wanted) or any(not same(a, b) for a, b in zip(got, wanted)):
        return None, "a replay's outputs differ from the eager calls' on the same inputs"
    return GroupGraph(graph, buffers, out), None


def _capture_one(fn: Callable, args: list, stream, device: torch.device) -> str | None:
    """One call captured alone (module docstring): why it could not be (None: it could), the stream put back and
    the device settled after a failure."""
    graph = torch.cuda.CUDAGraph()
    try:
        with capturing(torch, graph, stream, device):
            fn(*args)
    except Exception as exc:  # noqa: BLE001 - the calls are timed eagerly instead, where an error counts
        return f"one call captured alone: {type(exc).__name__}: {str(exc)[:300]}"
    return None


@contextmanager
def capturing(torch_, graph, stream, device) -> Iterator[None]:
    """`torch_.cuda.graph` on `stream`, with a memory pool of its own, and the process left as it was when the
    capture fails. torch's capture_end raises when CUDA refuses to end a capture (one that a launch on the legacy
    stream invalidated) before its own clean-up, which leaves two things wrong:
    - the device's default CUDA generator still marked as capturing: every later random draw on the GPU raises
      ("Offset increment outside graph capture encountered unexpectedly"). A runner makes its inputs on the GPU and,
      when that raises, on the CPU for the rest of the review: other values than the other runner's for the same
      seed. CUDA-L1's L1/32 HardTanh (a clone, then a kernel on the legacy stream) then failed the judge's trials
      with about 246,600 of 262,144 elements wrong, in every judged review of sessions 23 and 24 in which the
      Timer's capture had failed first (scripts/device/capture_aftermath.py, H100, session 24). The generator is
      given back the state it had before the capture (a copy taken here; torch's graph-safe state switch);
    - the caching allocator still counting the capture as underway (which holds back its processing of freed
      blocks' events for as long as any capture is): it is told the capture ended, and its pool is released where
      the capture had not ended (a capture that ended owns its pool). In the same measurement this was not what
      broke L1/32: a later capture's allocations went to its own pool, with or without it.
    Then the current stream is put back (torch's exit would have) and the device settled. `torch_`: torch, or a
    test's stand-in for it (judged.py passes its worker's)."""
    current = torch_.cuda.current_stream(device)
    index = None if isinstance(device, str) else getattr(device, "index", None)  # a name ("cuda"): the current one
    index = torch_.cuda.current_device() if index is None else index
    generator = torch_.cuda.default_generators[index]
    rng = generator.clone_state()
    pool = torch_.cuda.graph_pool_handle()
    try:
        with torch_.cuda.graph(graph, pool=pool, stream=stream):
            yield
    except BaseException:
        torch_.cuda.set_stream(current)
        generator.graphsafe_set_state(rng)
        try:
            torch_._C._cuda_endAllocateToPool(index, pool)
        except Exception:  # noqa: BLE001 - the capture had ended (the error came after): its graph owns the pool
            pass
        else:
            torch_._C._cuda_releasePool(index, pool)
        settle(torch_.cuda, device)
        raise
    torch_.cuda.set_stream(current)


def settle(cuda, device) -> None:
    """After a failed capture (here and in the judge's batch, worker/judged.py): the device's queue drained, and the
    runtime's last error read where torch's cudart bindings offer `cudaGetLastError` (torch 2.x's do not, so there
    only the drain happens; torch's own CUDA check reads, and so clears, that error when it raises one, as a refused
    capture's end does); a sticky error, the candidate's own fault, surfaces again in the eager calls. `cuda`:
    torch.cuda, or a caller's stand-in for it."""
    try:
        cuda.synchronize(device)
        cudart = cuda.cudart()
        if hasattr(cudart, "cudaGetLastError"):
            cudart.cudaGetLastError()
    except Exception:  # noqa: BLE001
        pass
