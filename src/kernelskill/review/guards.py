"""Runtime guards used inside the review worker: they make the verdict hold against an adversarial candidate.

- `Integrity`: the functions the harness relies on must still be the same objects after the candidate ran.
- `poison_free_cuda_memory`: fill the caching allocator's free blocks with NaN so results left behind by the
  reference cannot be handed back through `torch.empty`.
- `output_problem`: outputs must be plain, materialized tensors on the reviewed device.
- `OpTrace` / `KernelTracker`: which PyTorch compute ops and which of its own kernels a forward actually ran.
"""

from __future__ import annotations

import threading
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _integrity_targets() -> dict[str, object]:
    import torch.testing

    targets = {
        "torch.allclose": torch.allclose,
        "torch.isclose": torch.isclose,
        "torch.equal": torch.equal,
        "torch.testing.assert_close": torch.testing.assert_close,
        "torch.manual_seed": torch.manual_seed,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "torch.cuda.current_stream": torch.cuda.current_stream,
        "torch.cuda.memory_snapshot": torch.cuda.memory_snapshot,
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.time": time.time,
        "time.monotonic": time.monotonic,
        "threading.active_count": threading.active_count,
        "isinstance": isinstance,
        "type": type,
        "float": float,
        "len": len,
    }
    for name in ("__eq__", "__ne__", "__sub__", "abs", "max", "sum", "clone", "copy_", "to", "detach", "cpu",
                 "double", "isfinite", "numel", "reshape", "tolist", "item", "__getitem__", "__setitem__"):
        targets[f"torch.Tensor.{name}"] = getattr(torch.Tensor, name)
    for name in ("isfinite", "isnan", "unravel_index", "tensor", "empty", "randn", "rand", "float64"):
        targets[f"torch.{name}"] = getattr(torch, name)
    return targets


class Integrity:
    """Identities of the harness's functions, taken before any candidate code runs."""

    def __init__(self) -> None:
        self.expected = {name: id(obj) for name, obj in _integrity_targets().items()}
        self._keep = _integrity_targets()  # hold the originals alive so ids stay unique

    def tampered(self) -> list[str]:
        try:
            now = _integrity_targets()
        except Exception as exc:  # an attribute deleted or broken
            return [f"<lookup failed: {type(exc).__name__}: {exc}>"]
        return sorted(name for name, obj in now.items() if id(obj) != self.expected.get(name))


class ModuleSnapshot:
    """Every attribute of the modules and classes that references and harnesses use, by identity.

    `Integrity` guards the few functions a review's verdict rests on. A warm worker also needs the next review's
    *reference* to be the real one: a candidate that replaced `torch.nn.functional.gelu` (by a route the static
    checks missed) would otherwise skew every later review in the process. Attributes that appear later (lazy
    imports) are ignored; an existing one that changed or vanished makes the process unfit for another review.
    """

    def __init__(self) -> None:
        self.expected = {name: self._ids(obj) for name, obj in self._targets().items()}

    @staticmethod
    def _targets() -> dict[str, object]:
        import builtins
        import math
        import random

        import torch.nn.functional as F

        return {"torch": torch, "torch.nn.functional": F, "torch.Tensor": torch.Tensor, "torch.nn.Module": torch.nn.Module,
                "torch.cuda": torch.cuda, "torch.linalg": torch.linalg, "torch.fft": torch.fft, "torch.special": torch.special,
                "builtins": builtins, "math": math, "time": time, "random": random, "threading": threading}

    @staticmethod
    def _ids(obj) -> dict[str, int]:
        return {k: id(v) for k, v in list(vars(obj).items())}

    def changed(self) -> list[str]:
        out = []
        for name, obj in self._targets().items():
            now = self._ids(obj)
            out += [f"{name}.{k}" for k, v in self.expected[name].items() if now.get(k) != v]
        return sorted(out)


def poison_free_cuda_memory(device: torch.device) -> int:
    """Fill every free block that the caching allocator holds with 0xFF bytes (NaN for floats, -1 for ints).

    Allocating exactly the size of each inactive block makes the allocator hand out that block (best fit), so after
    freeing them again every cached byte the candidate can get from `torch.empty` is poisoned. Returns the bytes
    poisoned.
    """
    torch.cuda.synchronize(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    sizes = [
        block["size"]
        for segment in torch.cuda.memory_snapshot()
        if segment.get("device") == index
        for block in segment["blocks"]
        if block["state"] == "inactive"
    ]
    held = []
    for size in sorted(sizes, reverse=True):
        try:
            held.append(torch.empty(size, dtype=torch.uint8, device=device))
        except torch.OutOfMemoryError:
            break
    for t in held:
        t.fill_(0xFF)
    total = sum(t.numel() for t in held)
    del held
    torch.cuda.synchronize(device)
    return total


def output_problem(out, device: torch.device) -> str | None:
    """Why an output is not a plain materialized tensor on `device` (None when it is fine)."""
    from kernelskill.review.compare import flatten_outputs

    for i, o in enumerate(flatten_outputs(out)):
        if isinstance(o, (int, float, bool)) or o is None:
            continue
        if type(o) is not torch.Tensor:
            return f"output {i} is a {type(o).__module__}.{type(o).__qualname__}, not a plain torch.Tensor"
        if o.device.type != device.type:
            return f"output {i} is on {o.device}, expected {device.type}"
        if o.layout != torch.strided:
            return f"output {i} has layout {o.layout}; return a dense (strided) tensor"
        if o.is_conj() or o.is_neg():
            return f"output {i} carries a lazy conjugate/negative bit; return a materialized tensor"
        if getattr(o, "is_meta", False) or o.device.type == "meta":
            return f"output {i} is a meta tensor (no data)"
    return None


# Ops that move, view, allocate or fill memory. They are not "the computation", so a candidate may use them
# freely (allocating outputs, reshaping, making inputs contiguous).
NON_COMPUTE_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_", "zero_", "copy", "copy_",
    "_to_copy", "to", "clone", "contiguous", "detach", "alias", "view", "_unsafe_view", "reshape", "as_strided",
    "t", "transpose", "permute", "unsqueeze", "squeeze", "expand", "expand_as", "slice", "select", "split",
    "split_with_sizes", "chunk", "unbind", "flatten", "unflatten", "narrow", "lift_fresh", "resize_", "set_",
    "arange", "linspace", "scalar_tensor", "_local_scalar_dense", "item", "is_nonzero", "size", "stride",
    "numel", "dim", "sym_size", "sym_stride", "sym_numel", "_reshape_alias", "view_as", "squeeze_", "unsqueeze_",
    "t_", "transpose_", "record_stream", "_has_compatible_shallow_copy_type", "lift", "_conj", "_neg_view",
    "resolve_conj", "resolve_neg", "is_same_size", "_copy_from", "_copy_from_and_resize", "detach_", "randn",
    "rand", "normal_", "uniform_", "random_", "set_.source_Storage",
}


class OpTrace(TorchDispatchMode):
    """Records the PyTorch operators a forward calls (aten level), skipping memory movement and views."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, int] = {}
        self.paused = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused:
            name = func.overloadpacket.__name__
            if name not in NON_COMPUTE_OPS:
                self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


class KernelTracker:
    """Counts launches of Triton kernels by name by wrapping Triton's launch entry points (class level).

    Works for compiled launches (`JITFunction.run`) and the CPU interpreter (`InterpretedFunction.run`); while a
    kernel runs, `trace` (if given) is paused so the interpreter's own tensor traffic is not counted as ops.
    """

    def __init__(self) -> None:
        self.launches: dict[str, int] = {}
        self.trace: OpTrace | None = None
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        try:
            from triton.runtime import jit as triton_jit
        except ImportError:
            return
        classes = [triton_jit.JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        except ImportError:
            pass
        for cls in classes:
            original = cls.run
            tracker = self

            def run(self, *args, __original=original, **kwargs):
                name = getattr(getattr(self, "fn", None), "__name__", None) or getattr(self, "__name__", "triton_kernel")
                tracker.launches[name] = tracker.launches.get(name, 0) + 1
                if tracker.trace is not None:
                    tracker.trace.paused += 1
                try:
                    return __original(self, *args, **kwargs)
                finally:
                    if tracker.trace is not None:
                        tracker.trace.paused -= 1

            cls.run = run
        self._installed = True


# Process-wide numeric and performance switches a candidate may flip (KernelBench's harness lets it, and the reference
# then runs under them too). Read with getters so a torch without one of them just leaves it out.
_BACKEND_FLAGS = {
    "cudnn.benchmark": ("torch.backends.cudnn", "benchmark"),
    "cudnn.deterministic": ("torch.backends.cudnn", "deterministic"),
    "cudnn.allow_tf32": ("torch.backends.cudnn", "allow_tf32"),
    "cuda.matmul.allow_tf32": ("torch.backends.cuda.matmul", "allow_tf32"),
    "cuda.matmul.allow_fp16_reduced_precision_reduction": ("torch.backends.cuda.matmul",
                                                           "allow_fp16_reduced_precision_reduction"),
    "cuda.matmul.allow_bf16_reduced_precision_reduction": ("torch.backends.cuda.matmul",
                                                           "allow_bf16_reduced_precision_reduction"),
}


def _holder(path: str):
    obj = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def backend_flags() -> dict[str, object]:
    """The current value of every global switch that changes how PyTorch computes (TF32, cuDNN autotuning, ...)."""
    values: dict[str, object] = {}
    for name, (path, attr) in _BACKEND_FLAGS.items():
        try:
            values[name] = getattr(_holder(path), attr)
        except Exception:  # noqa: BLE001 - a flag this torch lacks or refuses to read (mixed precision APIs)
            continue
    values["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    values["default_dtype"] = str(torch.get_default_dtype())
    values["deterministic_algorithms"] = torch.are_deterministic_algorithms_enabled()
    return values


def changed_backend_flags(before: dict[str, object]) -> dict[str, object]:
    """The switches whose value differs from `before`, with their new value."""
    now = backend_flags()
    return {name: value for name, value in now.items() if before.get(name) != value}


def restore_backend_flags(before: dict[str, object]) -> list[str]:
    """Put every switch back to `before`; returns the ones that could not be restored (the process is then unfit)."""
    failed = []
    for name, value in changed_backend_flags(before).items():
        try:
            if name == "float32_matmul_precision":
                torch.set_float32_matmul_precision(before[name])
            elif name == "default_dtype":
                torch.set_default_dtype(getattr(torch, str(before[name]).removeprefix("torch.")))
            elif name == "deterministic_algorithms":
                torch.use_deterministic_algorithms(bool(before[name]))
            else:
                path, attr = _BACKEND_FLAGS[name]
                setattr(_holder(path), attr, before[name])
        except Exception:  # noqa: BLE001 - reported, and the worker is retired
            failed.append(name)
    return failed + [name for name in changed_backend_flags(before) if name not in failed]
