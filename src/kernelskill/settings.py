"""One settings object per concern, validated once (pydantic), with defaults in code.

`ReviewSettings` holds everything that changes a verdict or a timing; it is recorded with every result so a number
can always be traced back to how it was measured. The defaults live here and nowhere else: a command-line option
that is not given leaves its setting out (`given`), and `choices` turns a setting's Literal into the values its
option accepts.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelskill.errors import KernelSkillError

Device = Literal["auto", "cuda", "cpu"]
Rules = Literal["strict", "kernelbench"]
Backend = Literal["triton", "cuda"]
Baseline = Literal["compile"]
Order = Literal["random", "reference_first", "candidate_first"]
WARMUP = {"cuda": 25, "cpu": 2}  # warm-up calls before timing, when not set (the interpreter is slow)
ITERS = {"cuda": 100, "cpu": 10}  # timed calls, when not set


class StageTimeouts(BaseModel):
    """Wall-clock limits in seconds for each stage of a review (a stage past its limit fails the candidate)."""

    model_config = ConfigDict(extra="forbid")

    load: float = Field(120.0, gt=0, description="import torch, load the problem, build the reference")
    compile: float = Field(600.0, gt=0, description="build the candidate (a cold load_inline build takes ~30 s on a GPU host)")
    verify: float = Field(300.0, gt=0, description="all correctness trials")
    time: float = Field(600.0, gt=0, description="timing reference, candidate and optional torch.compile baseline")


class Guards(BaseModel):
    """The anti-reward-hacking guards. All on in normal use; tests turn one off to prove it is what catches a cheat."""

    model_config = ConfigDict(extra="forbid")

    static_checks: bool = True  # reject monkey-patching, frame access, threads, try/except fallbacks … before running
    secret_seeds: bool = True  # trial seeds drawn from the OS, never the well-known KernelBench seed
    clone_inputs: bool = True  # reference and candidate get their own copies of every input
    poison_freed_memory: bool = True  # fill the allocator's free blocks with NaN before the candidate runs (CUDA)
    output_types: bool = True  # outputs must be plain, materialized torch.Tensors on the right device
    integrity: bool = True  # torch / timing / comparison functions must be the same objects after the candidate ran
    no_threads: bool = True  # the candidate may not leave threads running
    timed_outputs: bool = True  # outputs of the last timed calls are checked too (defeats caching across calls)
    device_sync: bool = True  # synchronize the whole device before the stop event (counts side-stream work)
    kernel_policy: bool = True  # the candidate must launch its own kernels and not just re-run the reference's ops
    input_distributions: bool = True  # verify also on inputs scaled x10 and offset +5, not only get_inputs()' own
    # the verdict decided outside the runner (review/judge.py): trials and a timed batch on seeds the runner learns
    # late, outputs compared here, the reference timed in a runner of its own; off, the runner's report is the verdict
    judge: bool = True


class Sandbox(BaseModel):
    """The layers confining every process that runs candidate code (review workers, the profiler's driver); see
    review/confine.py. All on in normal use; turned off only to measure their cost or to debug, with
    KERNELSKILL_SANDBOX=off (or a comma list of the layers to keep, e.g. KERNELSKILL_SANDBOX=network,environment)."""

    model_config = ConfigDict(extra="forbid")

    network: bool = True  # no socket but AF_UNIX (network namespace, else seccomp, else Landlock TCP rules)
    filesystem: bool = True  # Landlock: write only scratch and caches, read only what a kernel needs
    environment: bool = True  # an allowlist of variables instead of dropping secret-looking names
    user: bool = True  # a harness running as root drops the worker to nobody (65534); else see review/confine.py
    processes: bool = True  # a PID namespace of its own: what it starts dies with it, no other process in /proc

    @classmethod
    def from_env(cls) -> "Sandbox":
        raw = os.environ.get("KERNELSKILL_SANDBOX", "").strip().lower()
        if raw in ("", "on", "1", "true", "all"):
            return cls()
        if raw in ("off", "0", "false", "none"):
            return cls(network=False, filesystem=False, environment=False, user=False, processes=False)
        keep = {part.strip() for part in raw.split(",") if part.strip()}
        unknown = sorted(keep - set(cls.model_fields))
        if unknown:
            raise KernelSkillError(f"KERNELSKILL_SANDBOX={raw!r}: unknown layer {', '.join(unknown)}; write on, off "
                                   f"or a comma list of {', '.join(cls.model_fields)}")
        return cls(**{name: name in keep for name in cls.model_fields})


class ReviewSettings(BaseModel):
    """How a candidate is reviewed. Defaults follow the published protocol (5 trials, 1e-2 tolerances, 25/100)."""

    model_config = ConfigDict(extra="forbid")

    device: Device = "auto"
    backend: Backend | None = Field(None, description="None: detect from the candidate source")
    trials: int = Field(5, ge=1, le=1000)
    atol: float = Field(1e-2, ge=0)
    rtol: float = Field(1e-2, ge=0)
    warmup: int | None = Field(None, ge=0, description="None: WARMUP for the device")
    iters: int | None = Field(None, ge=1, description="None: ITERS for the device")
    timing: bool = True
    baseline: Baseline | None = None
    allow_torch_ops: bool = False
    rules: Rules = Field(
        "strict",
        description="strict: also reject what hides work from the measurement or leans on PyTorch (try/except "
        "fallbacks, global backend switches, no kernel of its own, re-running the reference's operators); "
        "kernelbench: the verdict KernelBench's harness would give, those violations kept as flags",
    )
    order: Order = Field(
        "random", description="which side runs first in each trial; random (a coin per trial) unless debugging"
    )
    input_sets: int = Field(3, ge=3, le=16, description="distinct input sets rotated through while timing")
    timing_protocol: Literal["graphed", "robust", "ungrouped", "single"] = Field(
        "graphed", description="graphed: robust, with the calls of a sample under 1 ms (the reference's) replayed "
        "from a CUDA graph captured once per loop, where every side's replay gives what its eager calls gave (else "
        "robust); robust: the device kept busy while a sample is enqueued (a side whose forward waits on the "
        "device is timed as the host runs it), calls under 50 us (the reference's) timed in groups per event pair "
        "and a noisy loop timed once more, every call launched one by one; ungrouped: robust with one call per "
        "event pair; single: one call per event pair, one loop, as the host launches it (kept to compare "
        "against). docs/h200/timing has the measurements")
    reverify_above: float = Field(10.0, gt=1, description="speedups above this are re-verified and flagged")
    reverify_trials: int = Field(20, ge=1)
    batch_retries: int = Field(
        1, ge=0, le=3, description="reviews on a GPU made again, each with fresh runners and inputs, when the judge's "
        "batch leaves the candidate's event times unconfirmed by no more than a busy host's hiccup (20 ms): the second's "
        "figure is kept when its batch confirms them, the lower of the two when not, and a failure is the verdict"
    )
    reuse_worker: bool = Field(
        True, description="serve reviews from a warm worker process (a fresh one after any crash, hang or rejection)"
    )
    timeouts: StageTimeouts = StageTimeouts()
    guards: Guards = Guards()
    sandbox: Sandbox = Field(default_factory=Sandbox.from_env)

    def resolved_warmup(self, device: str) -> int:
        return self.warmup if self.warmup is not None else WARMUP["cuda" if device == "cuda" else "cpu"]

    def resolved_iters(self, device: str) -> int:
        return self.iters if self.iters is not None else ITERS["cuda" if device == "cuda" else "cpu"]


M = TypeVar("M", bound=BaseModel)


def choices(name: str, values: Any) -> type[enum.Enum]:
    """The values of a Literal as a str Enum: a command-line option of this type accepts exactly those values."""
    return enum.Enum(name, [(v, v) for v in get_args(values)], type=str)


def given(**values: Any) -> dict[str, Any]:
    """The command-line values that were given (not None), choices as their plain values: what the settings take,
    so a setting left out keeps its one default."""
    return {k: v.value if isinstance(v, enum.Enum) else v for k, v in values.items() if v is not None}


def default(model: type[BaseModel], field: str) -> Any:
    """A setting's default, for the help text of its option."""
    return model.model_fields[field].default


def from_options(model: type[M], options: Mapping[str, str], /, **values) -> M:
    """Build settings from the given command-line values (see `given`); a value out of range (a negative tolerance,
    a NaN, a timeout of 0) becomes a KernelSkillError naming the option (`options` maps field names to flags), not
    a pydantic traceback."""
    try:
        return model(**given(**values))
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            field = ".".join(str(part) for part in e["loc"])
            flag = options.get(field, f"--{field.replace('_', '-')}")
            rule = e["msg"].removeprefix("Input should be ").removeprefix("Value error, ")
            problems.append(f"{flag} must be {rule} (got {e.get('input')!r})")
        raise KernelSkillError("; ".join(problems)) from None
