"""The runner's side of a batch replayed as a CUDA graph (review/worker/judged.py `capture`), with torch.cuda played
by a stand-in that behaves as torch's does where it matters here: `torch.cuda.graph` empties the caching allocator
on entry, a capture that fails to end leaves its own stream current, and a graph replays the tensor operations made
during its capture on the tensors they were made on (recorded below the Python level, as CUDA records launches),
while work done outside the recording (a kernel launched on the legacy default stream) ran once, at the capture,
and is not replayed. The calls themselves are real CPU torch. What runs on a GPU is in docs/h200/trust."""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from kernelskill.review.worker import judged


class _Stream(str):
    def wait_stream(self, other) -> None:
        pass


class _Recorder(TorchDispatchMode):
    """The operations a capture records, run as they are recorded; `replay` runs them again, writing each result
    into the tensor the capture's run returned (a graph's fixed addresses). Allocations are not replayed."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if any(isinstance(a, torch.Tensor) for a in args):
            self.ops.append((func, args, kwargs, out))
        return out

    def replay(self) -> None:
        for func, args, kwargs, out in self.ops:
            new = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and new.data_ptr() != out.data_ptr():
                out.copy_(new)


class _Allocator:
    """torch._C's hooks into the caching allocator's capture pools, as torch's allocator keeps them: a capture is
    underway from its start until its end succeeds (torch's capture_end raises before it ends one CUDA refused)."""

    def __init__(self) -> None:
        self.underway: list = []
        self.released: list = []

    def _cuda_endAllocateToPool(self, device, pool) -> None:  # noqa: N802 - torch's name
        if pool not in self.underway:
            raise RuntimeError("endAllocatePool: not currently recording to mempool_id")
        self.underway.remove(pool)

    def _cuda_releasePool(self, device, pool) -> None:  # noqa: N802
        self.released.append(pool)


class _Generator:
    """A CUDA generator as torch keeps it: a capture marks its state capturing until the capture's end succeeds
    (torch's capture_end raises first on a capture CUDA refused), and while it is marked every random draw outside
    a capture raises; the graph-safe switch puts another state in its place."""

    def __init__(self, state: dict | None = None) -> None:
        self.state = state if state is not None else {"capturing": False}

    def clone_state(self) -> "_Generator":
        return _Generator(dict(self.state))

    def graphsafe_set_state(self, other: "_Generator") -> None:
        self.state = other.state


class _Cuda:
    """torch.cuda as far as capture() uses it; `fail_end`: the capture's end raises (torch's capture_end on an
    invalidated capture), before torch would put the stream back or end the capture in the allocator (`_C`)."""

    def __init__(self, fail_end: bool = False) -> None:
        self.fail_end, self.current, self.log = fail_end, _Stream("default"), []
        self._C, self.handles, self.default_generators = _Allocator(), itertools.count(1), [_Generator()]
        self.end_error = "operation not permitted when stream is capturing"

    def graph_pool_handle(self):
        return (0, next(self.handles))

    def current_device(self) -> int:
        return 0

    def current_stream(self, device=None):
        return self.current

    def set_stream(self, stream) -> None:
        self.current = stream

    def synchronize(self, device=None) -> None:
        pass

    def Stream(self, device=None):  # noqa: N802 - torch's name
        return _Stream("side")

    def ExternalStream(self, handle, device=None):  # noqa: N802
        return _Stream(f"external {handle}")

    @contextmanager
    def stream(self, stream):
        before, self.current = self.current, stream
        yield
        self.current = before

    def CUDAGraph(self):  # noqa: N802
        g = SimpleNamespace(recorder=_Recorder())

        def replay():
            self.log.append("replay")
            g.recorder.replay()

        g.replay = replay
        return g

    def graph(self, g, pool=None, stream=None):
        cuda = self
        self.log.append(f"capture on {stream}")

        class _Capture:  # the body runs as it is captured, and is recorded to be replayed
            def __enter__(self):
                cuda.log.append("cache emptied")
                self.before, cuda.current = cuda.current, stream or _Stream("capture")
                cuda._C.underway.append(pool)
                cuda.default_generators[0].state["capturing"] = True
                g.recorder.__enter__()

            def __exit__(self, *exc):
                g.recorder.__exit__(*exc)
                if cuda.fail_end:
                    raise RuntimeError(cuda.end_error)
                cuda._C.underway.remove(pool)
                cuda.default_generators[0].state["capturing"] = False
                cuda.current = self.before
                return False

        return _Capture()

    def cudart(self):
        return SimpleNamespace(cudaGetLastError=lambda: self.log.append("last error read"))


def _worker(monkeypatch, cuda: _Cuda, forward, sets: int = 4):
    fresh = itertools.count(100)  # every fresh input set differs from the one before
    fake_torch = SimpleNamespace(no_grad=torch.no_grad, empty=torch.empty, Tensor=torch.Tensor, equal=torch.equal, uint8=torch.uint8,
                                 cuda=cuda, _C=cuda._C)
    w = SimpleNamespace(torch=fake_torch, device=SimpleNamespace(type="cuda"), batch_graph=None, batch_outputs=[],
                        ref_model=SimpleNamespace(to=lambda device: None), run_reference=forward,
                        make_inputs=lambda seed: [torch.arange(4.0) + next(fresh)], copy_args=lambda a: [x.clone() for x in a])
    batch = [[torch.full((4,), float(i))] for i in range(sets)]
    monkeypatch.setattr(judged, "read_batch", lambda path, count, device: (batch, torch.zeros(0, dtype=torch.uint8), 0))
    monkeypatch.setattr(judged, "_hold", lambda w, sizes: cuda.log.append(("held", tuple(sizes))))
    return w


def test_a_capture_that_fails_leaves_the_batch_eager_on_the_default_stream_with_its_blocks_held(monkeypatch, tmp_path):
    # torch.cuda.graph empties the allocator's cache on entry and, when capture_end raises, never puts the stream
    # back: the eager calls would then run on the capture's stream and pay cudaMalloc inside the timed part
    # (60-130 ms a side on the H100 when only one side's blocks were cached)
    cuda = _Cuda(fail_end=True)
    w = _worker(monkeypatch, cuda, lambda args: args[0] * 2)
    info = judged.prepare(w, "reference", [1, 2, 3, 4], str(tmp_path), reserve_bytes=16, graph=True)
    assert info["graph"] is False and "capture failed" in info["graph_note"], info
    assert w.batch_graph is None and cuda.current == "default"
    held = [i for i, e in enumerate(cuda.log) if isinstance(e, tuple)]
    assert held and held[-1] > max(i for i, e in enumerate(cuda.log) if e == "cache emptied"), cuda.log
    assert cuda.log[held[-1]] == ("held", (0, 64, 16)) and "last error read" in cuda.log
    assert cuda._C.underway == [] and len(cuda._C.released) == 1  # the failed capture ended in the allocator too
    assert not cuda.default_generators[0].state["capturing"]  # and the GPU's random draws work again


def test_a_replay_that_differs_from_the_eager_call_leaves_the_batch_eager(monkeypatch, tmp_path):
    calls = []

    def drifting(args):  # a forward whose answer depends on how often it ran
        calls.append(1)
        return args[0] + len(calls)

    cuda = _Cuda()
    w = _worker(monkeypatch, cuda, drifting)
    info = judged.prepare(w, "reference", [1, 2, 3, 4], str(tmp_path), reserve_bytes=16, graph=True)
    assert info["graph"] is False and "differ" in info["graph_note"], info
    assert w.batch_graph is None and cuda.log[-1] == ("held", (0, 64, 16))


@pytest.mark.parametrize("asked", [True, False])
def test_a_captured_batch_is_replayed_once_and_its_outputs_kept_as_the_eager_ones_would_be(monkeypatch, tmp_path,
                                                                                          asked):
    ran = []

    def forward(args):
        ran.append(1)
        return args[0] * 2

    cuda = _Cuda()
    w = _worker(monkeypatch, cuda, forward)
    info = judged.prepare(w, "reference", [1, 2, 3, 4], str(tmp_path), reserve_bytes=16, graph=asked)
    assert info.get("graph", None) is (True if asked else None), info
    before, replays = len(ran), cuda.log.count("replay")  # (the one-call check's replay among them)
    # on the per-thread default stream, which a legacy-stream launch cannot escape (judged._capture_stream)
    assert {e for e in cuda.log if str(e).startswith("capture on")} == ({"capture on external 2"} if asked else set())
    said = judged.calls(w, "reference", [], None, key=1)
    assert cuda.log.count("replay") - replays == (1 if asked else 0)
    assert len(ran) == before + (0 if asked else 4)  # a replay calls no forward
    assert [t.tolist() for t in w.batch_outputs] == [[2.0 * i] * 4 for i in range(4)]
    assert len(said["digests"]) == 4
    # a replayed batch keeps its outputs in the graph's pool: only the mask's block is held for it
    assert cuda.log[[i for i, e in enumerate(cuda.log) if isinstance(e, tuple)][-1]] == \
        (("held", (0,)) if asked else ("held", (0, 64, 16)))


def test_a_kernel_that_ran_at_the_capture_but_is_not_in_the_graph_leaves_the_batch_eager(monkeypatch, tmp_path):
    # a `<<<>>>` launch on the legacy default stream beside torch's non-blocking capture stream runs at once and is
    # not captured: replayed on the inputs it was captured on, the graph "gives" the eager call's bytes from the
    # capture's own run. On the H100 (session 17) an honest CUDA g01 candidate passed that check, and its replayed
    # batch, which computed nothing, failed the judge's comparison
    def legacy_stream(args):
        with _disable_current_modes():
            return args[0] * 2

    cuda = _Cuda()
    w = _worker(monkeypatch, cuda, legacy_stream)
    info = judged.prepare(w, "reference", [1, 2, 3, 4], str(tmp_path), reserve_bytes=16, graph=True)
    assert info["graph"] is False and "differ" in info["graph_note"], info
    assert w.batch_graph is None
