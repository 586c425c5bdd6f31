"""What a runner does for the judge (review/judge.py), after its own stages: calls on inputs made from seeds the
judge hands over only now, their outputs written to files the judge reads (review/exchange.py).

The batch's input file is masked with a key the runner learns only with `calls`, and `calls` ends by saying each
call's digest, which the judge checks against the outputs `commit` wrote: its `prepare` has nothing to compute on,
and its `commit` nothing left to compute.

Two roles share the commands. The reference runner (mode "reference") has run the problem's code and nothing else:
it times the reference, writes the reference's outputs for the judge's trial seeds and runs the judge's batch.
The candidate runner (mode "review") runs the candidate the same way once its own stages are over. Nothing a
runner says here decides anything: the judge compares the files and measures the batch's wall time itself.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kernelskill.review.exchange import (BATCH_INPUTS, BATCH_OUTPUTS, _bytes, digest, padded, read_batch,
                                         unmask, word_sums, wrap64, write_outputs)
from kernelskill.review.graphed import capturing, settle
from kernelskill.review.worker.checks import map_tensors

if TYPE_CHECKING:
    from kernelskill.review.worker.stages import Worker


@contextmanager
def _no_collection():
    """The batch's parts run without the cyclic garbage collector, in both runners: its passes cost with the size
    of the heap, which differs between a runner that ran the reference alone and one that ran a candidate's
    stages, and the judge compares the two sides' wall times part by part."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _sync(w: Worker) -> None:
    if w.device.type == "cuda":
        w.torch.cuda.synchronize(w.device)


def reference_call(w: Worker, args: list):
    w.ref_model.to(w.device)
    return w.run_reference(args)


def candidate_call(w: Worker, args: list):
    from kernelskill.review.worker.verify import move_candidate, poison

    move_candidate(w)
    poison(w)
    return w.candidate.run(args)


def outputs(w: Worker, role: str, seeds: list[int], out_dir: str) -> dict:
    """One call per seed, on get_inputs() made under that seed, each output written to out_dir/<i>.out."""
    call = reference_call if role == "reference" else candidate_call
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    written = 0
    for i, seed in enumerate(seeds):
        args = w.make_inputs(seed)
        out = call(w, w.copy_args(args))
        _sync(w)
        written += write_outputs(Path(out_dir) / f"{i}.out", out)
        del out
    return {"bytes": written}


def _set_bytes(one_set: list) -> int:
    """What one input set takes of the batch's input file (exchange.padded)."""
    sizes: list[int] = []
    map_tensors(one_set, lambda t: sizes.append(padded(t.numel() * t.element_size())))
    return sum(sizes)


def inputs(w: Worker, role: str, seeds: list[int], out_dir: str, key: int | None = None) -> dict:
    """The judge's batch, made once (reference runner only, untimed): one input set per seed from get_inputs(), drawn
    in turn after the first seed (make_input_sets), written to one file, masked with the judge's `key`. Both
    runners' `prepare` then loads the same file: the same work on both sides, which the judge compares, and little
    of it (no problem code, one file), so that its noise hides no work of a candidate's."""
    if role != "reference":
        raise ValueError("only the reference runner makes the batch's inputs")
    if key is None:
        raise ValueError("the batch's input file is masked with a key the judge gives")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    sets = w.make_input_sets(seeds[0], len(seeds)) if seeds else []
    written = write_outputs(Path(out_dir) / BATCH_INPUTS, sets, mask=(key, w.device))
    w.batch_set_bytes = _set_bytes(sets[0]) if sets else 0
    return {"bytes": written, "region_bytes": w.batch_set_bytes * len(sets)}


def _hold(w: Worker, sizes: list[int]) -> None:
    """Blocks of these sizes made at once and dropped: the caching allocator keeps them for the batch's parts."""
    if w.device.type == "cuda":
        held = [w.torch.empty(n, dtype=w.torch.uint8, device=w.device) for n in sizes if n]
        del held


def _warm(w: Worker) -> None:
    """The kernels `calls` runs besides the calls (the mask's draw and XOR, the digests' sums in each width) run
    once: a kernel's first launch in a process loads its module, and on the H100 that put 14 ms on the unmasking
    and 15 ms on the digests of g01's 768 MB batch, in a timed part, unevenly between two runners."""
    scratch = w.torch.zeros(64, dtype=w.torch.uint8, device=w.device)
    unmask(scratch, 1, 8)
    for width in (8, 4, 3):
        word_sums(scratch[:8 * width].view(8, width)).tolist()


def reserve(w: Worker, role: str, seeds: list[int], out_dir: str | None, reserve_bytes: int = 0) -> dict:
    """Before a batch (untimed; the candidate's before its input file is handed over): every allocation the batch's
    `prepare` and `calls` will make, made once and dropped, so that both runners find them in the caching allocator
    and the page-locked staging buffer at its size, and the kernels `calls` runs besides the calls (`_warm`). The
    judge compares the two sides' `calls` walls, and what one side pays there and the other does not reads as work
    hidden there, or hides some (on the H100, cudaMalloc alone put 60-130 ms on one side's part when only the
    other's allocations were cached):

    - the buffer the input file is read into and the mask drawn over it in `calls` (the candidate runner learns one
      set's size from get_inputs() under `seeds`, unrelated to the batch's);
    - the outputs' blocks (`reserve_bytes` a call). A runner that skips this only makes its own calls slower."""
    from kernelskill.review.exchange import CHUNK_BYTES, staging

    count = len(seeds)
    with _no_collection():
        if role == "reference":
            set_bytes = w.batch_set_bytes
        else:
            made = w.make_input_sets(seeds[0], 1) if seeds else []
            set_bytes = _set_bytes(made[0]) if made else 0
            del made
        if count:
            _hold(w, [set_bytes * count, set_bytes * count, reserve_bytes * count, reserve_bytes])
        _warm(w)
        _sync(w)
        if set_bytes and count:
            staging(min(set_bytes * count, CHUNK_BYTES))
    return {"sets": count, "set_bytes": set_bytes}


def prepare(w: Worker, role: str, seeds: list[int], out_dir: str, reserve_bytes: int = 0, graph: bool = False) -> dict:
    """The judge's batch, first part: the first len(seeds) input sets of the batch's file on the device, still
    masked (views of one buffer: exchange.read_batch), and the memory `calls` will take (the mask, and the kept
    outputs' blocks at `reserve_bytes` a call, the reference's, the same on both sides) allocated and freed here so
    that the caching allocator holds it: the timed calls then ask the driver for none. Without it a fresh runner's
    calls made a cudaMalloc every few calls, and the paces of two runners of the same elementwise op differed by up
    to 3x on the H200. With `graph` (the judge asks both runners alike) the calls are captured here (`capture`)."""
    why = None
    with _no_collection():
        w.batch_graph = None
        w.batch_sets, w.batch_buffer, w.batch_words = read_batch(Path(out_dir) / BATCH_INPUTS, len(seeds), w.device)
        w.batch_outputs = []
        if graph:
            why = capture(w, role) if w.device.type == "cuda" else "no CUDA graphs on a CPU"
        # after any capture, which gives the caching allocator's blocks back (torch.cuda.graph does); a replayed
        # batch keeps its outputs in the graph's own pool and needs only the mask's block
        kept = [] if w.batch_graph is not None else [reserve_bytes * len(seeds), reserve_bytes]
        _hold(w, [w.batch_words * 8, *kept])
        _sync(w)
    if not graph:
        return {"sets": len(w.batch_sets)}
    return {"sets": len(w.batch_sets), "graph": w.batch_graph is not None, **({"graph_note": why} if why else {})}


def _forward(w: Worker, role: str):
    """The bare call a batch makes: the reference's forward, or the candidate's (on the device), with no verdict
    on an error: a capture that fails leaves the calls to run eagerly, where an error is the candidate's."""
    if role == "reference":
        w.ref_model.to(w.device)
        return w.run_reference
    from kernelskill.review.worker.verify import move_candidate

    move_candidate(w)
    model = w.candidate.model
    return lambda args: model(*args)


def capture(w: Worker, role: str) -> str | None:
    """The batch's calls, each output copied into its row as `calls` keeps them, captured as one CUDA graph that
    `calls` replays once the inputs are unmasked (a capture records launches and computes nothing: the masked
    inputs give nothing away). Replayed, the calls run at the GPU's pace rather than their launches': a call of a
    few microseconds of GPU work takes 10-25 from Python, so no event time of a small kernel could be confirmed
    by the judge's clock in an eager batch, and its figure fell back to paces set by each process's launch speed
    (0.43x-2.38x for identical kernels on the H100, docs/h200/timing session 15). Only where one call, captured
    and replayed, gives the eager call's bytes exactly; else, or when the capture fails (a launch on the legacy
    default stream, a host synchronization), the batch runs eagerly as before. Returns why not (None: captured)."""
    torch = w.torch
    try:
        with torch.no_grad():
            fn = _forward(w, role)
            why = _replays_exactly(w, fn)
            if why:
                return why
            kept = _Kept(torch, len(w.batch_sets))
            graph = torch.cuda.CUDAGraph()
            with capturing(torch, graph, _capture_stream(w), w.device):
                for i, args in enumerate(w.batch_sets):
                    kept.add(i, fn(args))
    except Exception as exc:  # noqa: BLE001 - the calls run eagerly instead, where an error counts
        settle(w.torch.cuda, w.device)  # (a failed capture's stream and state: `capturing` put them back)
        return f"the capture failed: {type(exc).__name__}: {str(exc)[:300]}"
    w.batch_graph = (graph, kept)
    return None


def _replays_exactly(w: Worker, fn) -> str | None:
    """One call on a fresh input set of the problem's, made eagerly (on the capture's stream: the warm-up torch asks
    for before a capture) and from a graph captured on another fresh set whose tensors are then overwritten with the
    first's: why the two differ in any byte (None: they do not). Captured and replayed on the same contents, a
    kernel launched on the legacy default stream beside torch's non-blocking capture stream ran once, eagerly, during
    the capture, outside the graph, and left the right bytes for a replay that computed nothing (session 17, on
    the H100: an honest CUDA g01 candidate then failed the judge's comparison of its batch)."""
    import secrets

    torch = w.torch
    args = w.make_inputs(secrets.randbits(62))
    eager_args = w.copy_args(args)  # a forward may write into its inputs
    graph_args = w.copy_args(w.make_inputs(secrets.randbits(62)))
    stream = _capture_stream(w)  # (ordered with the legacy stream, and with a kernel built to launch on it)
    stream.wait_stream(torch.cuda.current_stream(w.device))
    with torch.cuda.stream(stream):
        wanted: list = []
        map_tensors(fn(eager_args), lambda t: wanted.append(t.detach().clone()))
    torch.cuda.current_stream(w.device).wait_stream(stream)
    kept = _Kept(torch, 1)
    graph = torch.cuda.CUDAGraph()
    with capturing(torch, graph, stream, w.device):
        kept.add(0, fn(graph_args))
    for dst, src in zip(graph_args, args):
        if isinstance(dst, torch.Tensor):
            dst.copy_(src)
    graph.replay()
    _sync(w)
    got: list = []
    map_tensors(kept.trees[0], got.append)
    if len(got) != len(wanted) or any(not _same_bytes(torch, a, b) for a, b in zip(got, wanted)):
        return "a replayed call's outputs differ from the eager call's"
    return None


def _capture_stream(w: Worker):
    """The stream a batch is captured on: CUDA's per-thread default stream (cudaStreamPerThread, handle 2), not one
    of torch's side streams. Those are non-blocking, so a kernel launched on the legacy default stream during their
    capture ran at once, outside the graph; the per-thread default stream synchronizes with the legacy one, so such
    a launch during its capture is an implicit dependency the capture refuses (it fails, and the batch runs eagerly).
    Kernels built with nvcc's `--default-stream per-thread` launch on it, and are captured."""
    return w.torch.cuda.ExternalStream(2, device=w.device)


def _same_bytes(torch, a, b) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(_bytes(a.contiguous()), _bytes(b.contiguous()))


class _Kept:
    """The batch's outputs as its calls return them: each tensor copied into its row of one block per position in
    the first call's outputs (a forward may hand back the same buffer every call), so that the calls' digests are
    one reduction a block. A call whose outputs differ in number, shape, dtype or device from the first's keeps
    copies of its own, digested alone."""

    def __init__(self, torch, count: int) -> None:
        self.torch, self.count = torch, count
        self.blocks: list | None = None
        self.trees: list = []
        self.alone: dict[int, list] = {}

    def add(self, i: int, out) -> None:
        leaves: list = []
        map_tensors(out, leaves.append)
        if self.blocks is None:
            self.blocks = [self.torch.empty((self.count, *t.shape), dtype=t.dtype, device=t.device) for t in leaves]
        blocks = self.blocks
        if len(leaves) == len(blocks) and all(b.shape[1:] == t.shape and b.dtype == t.dtype and b.device == t.device
                                              for b, t in zip(blocks, leaves)):
            rows = iter(b[i] for b in blocks)
            self.trees.append(map_tensors(out, lambda t: next(rows).copy_(t.detach())))
        else:
            mine = self.alone[i] = []

            def keep(t):
                mine.append(t.detach().clone())
                return mine[-1]

            self.trees.append(map_tensors(out, keep))

    def digests(self) -> list[int]:
        """Each call's digest (exchange.digest of its kept outputs)."""
        total = [0] * self.count
        for block in self.blocks or []:
            if self.count and block[0].numel():
                sums = word_sums(block.reshape(self.count, -1).view(self.torch.uint8)).tolist()
                total = [a + b for a, b in zip(total, sums)]
        for i, mine in self.alone.items():
            total[i] = digest(mine)
        return [wrap64(t) for t in total]


def calls(w: Worker, role: str, seeds: list[int], out_dir: str | None, key: int | None = None) -> dict:
    """The judge's batch, second part: the input sets unmasked with the judge's `key` (given only now), one call
    per set, back to back (the graph `prepare` captured, replayed, where it did), each output kept as it comes,
    then every call's digest, which the judge holds the outputs `commit` writes to. The judge times this command
    with its own clock; `calls_s` is only what this process says."""
    torch = w.torch
    if key is None:
        raise ValueError("the batch's calls need the judge's key to their inputs")
    graph, kept = w.batch_graph if w.batch_graph is not None else (None, _Kept(torch, len(w.batch_sets)))
    fn = None
    if graph is None and role == "reference":
        w.ref_model.to(w.device)
        fn = w.run_reference
    elif graph is None:
        from kernelskill.review.worker.verify import move_candidate

        move_candidate(w)
        fn = w.candidate.call
    start = time.perf_counter()
    with _no_collection(), torch.no_grad():
        unmask(w.batch_buffer, key, w.batch_words)
        if graph is not None:
            graph.replay()
        else:
            for i, args in enumerate(w.batch_sets):
                kept.add(i, fn(args))
        digests = kept.digests()
        _sync(w)
    w.batch_outputs = kept.trees
    return {"calls_s": round(time.perf_counter() - start, 6), "digests": digests}


def commit(w: Worker, role: str, seeds: list[int], out_dir: str) -> dict:
    """The judge's batch, last part: every output written out, before the judge says which it will compare."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    with _no_collection():
        written = write_outputs(Path(out_dir) / BATCH_OUTPUTS, w.batch_outputs)
    w.batch_sets, w.batch_outputs, w.batch_buffer, w.batch_graph = [], [], None, None
    return {"bytes": written}


def ready_compiled(w: Worker) -> dict:
    """`--baseline compile`: torch.compile(Model) compiled (or loaded from Inductor's cache: a bench warms it into
    the reference runner's caches) and called once, before the timing, as its own command: the judge runs it as an
    untimed step, on every CPU (a compile's workers pinned to the timing CPU with the loop would take minutes)."""
    from kernelskill.review.worker.baseline import ready_baseline

    compiled, warmed, failed = ready_baseline(w)
    w.baseline = (compiled, warmed, failed)
    return {"compiled": compiled is not None, "seconds": warmed.seconds if warmed else None, "error": failed}


def time_reference(w: Worker, input_seeds: list[int]) -> dict:
    """The reference timed as the candidate runner times it (the same Timer and protocol), in a process where no
    candidate code ever ran: the figure the judge holds the candidate runner's own reference timing against. With
    `--baseline compile`, torch.compile(Model), made ready by `baseline` (ready_compiled; here, where that was not
    asked), is timed in the same loop, interleaved with the reference: the compile baseline is a timing figure too,
    and a candidate's process could slow it."""
    from kernelskill.review.results import TimingStats
    from kernelskill.review.timing import PREFILL_MAX_S, Timer, graphs, protocol_limits
    from kernelskill.review.worker.baseline import ready_baseline

    sets = [w.make_inputs(s) for s in input_seeds]
    fns = {"reference": lambda *a: w.run_reference(list(a))}
    found: dict = {}
    if w.settings.baseline == "compile":
        compiled, warmed, failed = w.baseline or ready_baseline(w)
        if compiled is not None:
            fns["compiled_reference"] = compiled
            found["compile_warmup"] = warmed.model_dump(mode="json")
        else:
            found["compile_error"] = failed
    group, _, prefill_max_s = protocol_limits(w.settings.timing_protocol)
    timer = Timer(w.device, device_sync=True, prefill=prefill_max_s > 0, prefill_max_s=prefill_max_s or PREFILL_MAX_S,
                  graphs=graphs(w.settings.timing_protocol))
    samples, synced, _ = timer.run(fns, sets, w.req.warmup, w.req.iters, group=group)
    stats = TimingStats.from_samples(samples["reference"])
    host = timer.info.host_ms.get("reference")
    input_bytes = sum(v.numel() * v.element_size() for v in sets[0] if isinstance(v, w.torch.Tensor))
    if "compiled_reference" in samples:
        found["compiled_reference"] = TimingStats.from_samples(samples["compiled_reference"]).model_dump(mode="json")
        found["compiled_host_ms"] = timer.info.host_ms.get("compiled_reference")
    return {"reference": stats.model_dump(mode="json"), "host_ms": host, "group": timer.info.group,
            "graphed": bool(timer.info.graphed),
            "unqueued": list(timer.info.unqueued), "input_bytes": input_bytes, **found}


def stateful(w: Worker, seed: int) -> bool:
    """Whether the reference answers the same inputs differently on a second call (it keeps state across calls, as
    KernelBench's VanillaRNN keeps its hidden state): the judge then cannot hold a candidate, called a different
    number of times, to its outputs."""
    from kernelskill.review.compare import compare_outputs

    args = w.make_inputs(seed)
    first = map_tensors(reference_call(w, w.copy_args(args)), lambda t: t.detach().clone())
    second = reference_call(w, w.copy_args(args))
    return not compare_outputs(first, second, w.settings.atol, w.settings.rtol, -1).ok


COMMANDS = {"outputs": outputs, "inputs": inputs, "reserve": reserve, "prepare": prepare, "calls": calls, "commit": commit}
