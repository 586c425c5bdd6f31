"""The graphed timing protocol's capture (review/graphed.py), with torch.cuda played by test_batch_graph's stand-in:
a graph replays the tensor operations recorded during its capture, on the tensors they were made on, and work done
outside the recording (a launch on the legacy default stream) ran once, at the capture. The calls are real CPU
torch. The protocol's figures on a GPU are in docs/h200/timing (session 21)."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch.utils._python_dispatch import _disable_current_modes

from kernelskill.review import graphed, timing
from kernelskill.review.timing import Timer
from tests.review.test_batch_graph import _Cuda


def _sets(n: int = 3) -> list[list[torch.Tensor]]:
    return [[torch.full((4,), float(10 * (i + 1)))] for i in range(n)]


def _capture(monkeypatch, fns, cuda: _Cuda | None = None, group: int = 2):
    cuda = cuda or _Cuda()
    monkeypatch.setattr(graphed, "torch", SimpleNamespace(Tensor=torch.Tensor, equal=torch.equal,
                                                          allclose=torch.allclose, cuda=cuda, _C=cuda._C))
    buffers = [[torch.zeros(4)] for _ in range(group)]
    graphs, why = graphed.capture_groups(fns, buffers, _sets(), "cuda")
    return graphs, why, buffers, cuda


def test_each_sides_group_is_captured_on_the_per_thread_stream_and_replays_the_calls_on_new_contents(monkeypatch):
    graphs, why, buffers, cuda = _capture(monkeypatch, {"reference": lambda x: x * 2, "candidate": lambda x: x + x})
    assert why is None and set(graphs) == {"reference", "candidate"}
    assert {e for e in cuda.log if str(e).startswith("capture on")} == {"capture on external 2"}
    assert cuda.current == "default"
    for k in range(3):  # as the Timer's samples do: new contents copied into the same buffers, then one replay
        for c, slot in enumerate(buffers):
            slot[0].copy_(_sets()[(k + c) % 3][0])
        for g in graphs.values():
            assert g.replay().tolist() == (_sets()[(k + 1) % 3][0] * 2).tolist()  # the group's last call


def test_a_side_whose_replay_differs_from_its_eager_calls_leaves_every_side_eager(monkeypatch):
    calls = []

    def drifting(x):  # an answer that depends on how often it ran
        calls.append(1)
        return x + len(calls)

    graphs, why, _, _ = _capture(monkeypatch, {"reference": lambda x: x * 2, "candidate": drifting})
    assert graphs == {} and "candidate" in why and "differ" in why


def test_a_launch_that_escaped_the_capture_leaves_every_side_eager(monkeypatch):
    # captured and replayed on the same contents, work done outside the graph at the capture leaves the right bytes
    # for a replay that computes nothing: the capture is made on other contents than the replay checked against
    def legacy_stream(x):
        with _disable_current_modes():
            return x * 2

    graphs, why, _, _ = _capture(monkeypatch, {"reference": lambda x: x * 2, "candidate": legacy_stream})
    assert graphs == {} and "differ" in why


def test_a_capture_that_fails_to_end_puts_the_stream_back_and_leaves_every_side_eager(monkeypatch):
    cuda = _Cuda(fail_end=True)
    graphs, why, _, cuda = _capture(monkeypatch, {"reference": lambda x: x * 2}, cuda)
    assert graphs == {} and "RuntimeError" in why and cuda.current == "default"


def test_the_graphed_protocol_is_robust_with_graphs_and_a_cpu_timer_never_captures():
    assert timing.graphs("graphed") and not any(timing.graphs(p) for p in ("robust", "ungrouped", "single"))
    assert timing.protocol_limits("graphed") == timing.protocol_limits("robust")
    timer = Timer(torch.device("cpu"), graphs=True)
    samples, _, kept = timer.run({"f": lambda x: x + 1}, _sets(), warmup=0, iters=4, group=2, keep_last=2)
    assert timer.info.graphed == [] and timer.info.graph_error is None and len(samples["f"]) == 4
    assert all(torch.equal(out, _sets()[k][0] + 1) for k, out in kept["f"])


def test_calls_under_a_millisecond_are_graphed_and_a_retime_keeps_the_warm_ups_decision():
    import time as clock

    timer = Timer(torch.device("cpu"), graphs=True)
    timer.run({"f": lambda x: x + 1}, _sets(), warmup=3, iters=2)
    assert timer.graph_calls  # a CPU timer never captures, but decides as a GPU one would
    timer.run({"f": lambda x: x + 1}, _sets(), warmup=0, iters=2, group=1)
    assert timer.graph_calls  # no warm-up (a re-time): the decision stays
    slow = Timer(torch.device("cpu"), graphs=True)
    slow.run({"f": lambda x: clock.sleep(timing.GRAPH_BELOW_S * 2) or x + 1}, _sets(), warmup=3, iters=2)
    assert not slow.graph_calls


def test_a_replay_that_differs_only_by_a_kernels_own_rounding_is_graphed(monkeypatch):
    calls = []

    def atomics(x):  # each run sums in another order: the last bits move from call to call
        calls.append(1)
        return x * 2 + 1e-6 * (len(calls) % 3)

    graphs, why, _, _ = _capture(monkeypatch, {"reference": lambda x: x * 2, "candidate": atomics})
    assert why is None and set(graphs) == {"reference", "candidate"}


def test_where_the_outputs_hardly_depend_on_the_inputs_an_escaped_launch_is_still_caught(monkeypatch):
    # a constant plus 1e-5 of the input: two input sets' outputs agree to the replay check's tolerance, so a
    # replay that computed nothing would pass it; there the replay must match to the byte
    def legacy_stream(x):
        with _disable_current_modes():
            return torch.full_like(x, 7.0) + x * 1e-5

    graphs, why, _, _ = _capture(monkeypatch, {"candidate": legacy_stream})
    assert graphs == {} and "differ" in why
    graphs, why, _, _ = _capture(monkeypatch, {"candidate": lambda x: torch.full_like(x, 7.0) + x * 1e-5})
    assert why is None  # captured, it replays to the byte


class _Invalidating(_Cuda):
    """A capture that a launch on the legacy stream invalidated: the capture's end raises, and so does the next
    operation made inside it (in a group, the next call's own work, half-way through the candidate's code)."""

    def __init__(self) -> None:
        super().__init__()
        self.invalidated = self.capturing = False
        self.failed_inside = 0
        self.end_error = "operation failed due to a previous error during capture"

    def graph(self, g, pool=None, stream=None):
        inner, cuda = super().graph(g, pool, stream), self

        class _Capture:
            def __enter__(self):
                cuda.invalidated, cuda.capturing = False, True
                inner.__enter__()

            def __exit__(self, *exc):
                cuda.capturing = False
                cuda.fail_end, cuda.invalidated = cuda.invalidated, False  # the end raises as torch's does
                return inner.__exit__(*exc)

        return _Capture()

    def synchronize(self, device=None) -> None:
        self.log.append("synchronized")


def test_a_call_whose_capture_fails_is_never_captured_in_a_group_and_the_device_is_settled(monkeypatch):
    # CUDA-L1's L1/32 HardTanh: a clone on the current stream, then its kernel on the legacy stream. Captured in a
    # group, the second call's clone failed inside the invalidated capture, and the runner then gave the judge's
    # trials another call's values (docs/h200/kernelbench session 23, H100). One call captured alone fails at the
    # capture's end, with no call left half done
    cuda = _Invalidating()

    def clone_then_legacy_launch(x):
        if cuda.invalidated:
            cuda.failed_inside += 1
            raise RuntimeError("operation failed due to a previous error during capture")
        out = x.clone()
        if cuda.capturing:  # the launch on the legacy stream invalidates the capture
            cuda.invalidated = True
        with _disable_current_modes():
            out.clamp_(-1.0, 1.0)
        return out

    graphs, why, _, cuda = _capture(monkeypatch, {"reference": lambda x: x.clamp(-1.0, 1.0),
                                                  "candidate": clone_then_legacy_launch}, cuda, group=3)
    assert graphs == {} and "candidate" in why and "one call captured alone: RuntimeError: operation failed" in why, why
    assert cuda.failed_inside == 0  # no capture of a group was tried: nothing failed half-way through a call
    assert cuda.current == "default" and cuda.log[-2:] == ["synchronized", "last error read"]
    # and the allocator was told the failed capture is over, its pool released: torch's capture_end raised before
    # it said so, and the allocator kept the failed capture's pool among those captures allocate to
    assert cuda._C.underway == [] and len(cuda._C.released) == 1
    # the GPU's random generator no longer marked as capturing: left marked, every random draw on the GPU raised,
    # the runner made its inputs on the CPU, other values than the reference runner's for the same seed, and
    # L1/32 failed the judge's trials (scripts/device/capture_aftermath.py, session 24, H100)
    assert not cuda.default_generators[0].state["capturing"]
