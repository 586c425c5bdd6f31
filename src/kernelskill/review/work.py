"""The problem's minimum work: FLOPs of its matrix products and convolutions, and the bytes it must move.

    measure_problem_work(problem.py) -> ProblemWork(flops, bytes, precision)

The reference `Model` is built and run once on PyTorch's meta device (shapes only: no memory, no GPU, no real
arithmetic) under `torch.utils.flop_counter.FlopCounterMode`. Bytes are the inputs, the outputs and the parameters
and buffers, each moved once - the least DRAM traffic any implementation needs. FLOPs count what the FLOP counter
knows (matmul, conv, attention); elementwise work is not counted, so the floor stays a lower bound.

The problem file is the user's code: it is counted in the problem probe (review/probe.py), a confined child
process with a time limit that also checks the problem, once per problem source. When anything fails (PyTorch
missing, a get_inputs that insists on CUDA, an op without a meta kernel) the work is unknown, with the reason in
`note`, and so is the floor.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from kernelskill.problem import Problem

SOURCE = "flop_counter"


class ProblemWork(BaseModel):
    """The problem's minimum work and the GPU it runs on: what the speed-of-light floor (roofline.py) comes from.

    Each part may be unknown (None); the floor is then unknown too, never guessed. `forward_ms` is the candidate's
    measured forward time (the Reviewer's), when known; without it the profiler's or ncu's times are used.
    """

    source: str  # how the work was found: "flop_counter" (the reference run under FlopCounterMode), "manifest", ...
    flops: float | None = Field(default=None, ge=0)  # matrix products and convolutions, as a FLOP counter sees them
    bytes: float | None = Field(default=None, ge=0)  # inputs + outputs + parameters, each moved once
    output_bytes: float | None = Field(default=None, ge=0)  # the outputs alone: what any kernel must write
    precision: str | None = None  # roofline.PRECISIONS: the precision whose peak bounds the work
    gpu: str | None = None  # device name or roofline id; None: taken from the ncu report when there is one
    forward_ms: float | None = Field(default=None, gt=0)
    note: str | None = None  # why a part is unknown


def measure_problem_work(problem: str | Path, timeout_s: float | None = None) -> ProblemWork:
    """The problem's work, counted in the problem probe (a confined child; once per problem source in this process
    with the default limit); never raises for a problem that cannot be measured. A sandbox that
    cannot be set up is a KernelSkillError (review/probe.py)."""
    from kernelskill.errors import ProblemError
    from kernelskill.problem import read_problem
    from kernelskill.review import probe

    path = Path(problem).resolve()
    if not path.is_file():
        return ProblemWork(source=SOURCE, note=f"{path}: no such problem file")
    try:
        parsed = read_problem(path)
    except ProblemError as exc:
        return ProblemWork(source=SOURCE, note=f"measuring the problem's work failed: {exc}")
    if timeout_s is None:
        return probe.probe(parsed).work
    return probe.run_probe(parsed, timeout_s).work


def count_work(problem: Problem) -> ProblemWork:
    """The problem's work, counted in this process: problem code runs here (the probe's child calls it)."""
    try:
        return ProblemWork.model_validate(_count(problem))
    except Exception as exc:  # noqa: BLE001 - any failure means "unknown", with the reason
        return ProblemWork(source=SOURCE, note=f"measuring the problem's work failed: {type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}")


def _measure(path: Path) -> dict:
    """The work of the problem file at `path`, counted in this process (scripts and tests that run it in a child
    of their own)."""
    from kernelskill.problem import read_problem

    return _count(read_problem(path))


def _count(problem: Problem) -> dict:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from kernelskill.problem import call_entry, instantiate_problem

    loaded = instantiate_problem(problem)

    def run(device: str):
        with torch.device(device):
            init = call_entry(problem, loaded.get_init_inputs, "get_init_inputs")
            torch.manual_seed(0)
            model = loaded.model_cls(*init)
            inputs = call_entry(problem, loaded.get_inputs, "get_inputs")
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        if any(t.device.type != device for t in tensors):
            raise RuntimeError("get_inputs() places tensors on a device explicitly; they cannot be made shape-only")
        counter = FlopCounterMode(display=False)
        with torch.device(device), torch.no_grad(), counter:  # tensors the forward creates are shape-only too
            out = model(*inputs)
        return model, tensors, out, counter

    where = "the meta device"
    try:
        model, tensors, out, counter = run("meta")
    except RuntimeError as exc:
        # a forward that needs values (Swin's .item() on a computed shift) runs once on the CPU instead, with real
        # tensors: slower, and bounded by the child's time limit
        if "meta" not in str(exc):
            raise
        model, tensors, out, counter = run("cpu")
        where = "the CPU (the forward reads values, which the meta device cannot give)"
    outputs = [o for o in (out if isinstance(out, list | tuple) else [out]) if isinstance(o, torch.Tensor)]
    state = list(model.parameters()) + list(model.buffers())
    moved = sum(t.numel() * t.element_size() for t in tensors + outputs + state)
    flops = float(counter.get_total_flops())
    floats = [t for t in tensors + state if t.is_floating_point()]
    dtype = str(max(floats, key=lambda t: t.numel()).dtype) if floats else "torch.float32"
    from kernelskill.review.roofline import compute_precision

    written = sum(t.numel() * t.element_size() for t in outputs)
    return {"source": SOURCE, "flops": flops, "bytes": float(moved), "output_bytes": float(written),
            "precision": compute_precision(dtype, flops > 0),
            "note": f"FlopCounterMode on {where}; inputs, outputs and parameters in {dtype}"}  # fmt: skip
