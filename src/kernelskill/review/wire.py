"""What goes over the pipe between the reviewer and its worker process: one typed request, typed messages back.

The reviewer sends a `ReviewRequest` as one JSON line on the worker's stdin. The worker answers on a pipe of its own
with JSON lines, each one `Message`: `ready` once at start-up, then per review `stage` before each stage, `update`
with what a stage found (`StageResults`, only the fields it reports), `stage_seconds` after each stage, at most one
`verdict` when the review fails, and `done` last. Both sides use these models, so a field renamed on one side is a
validation error, not a silently missing key; `sandbox.WorkerProcess.serve` folds the updates into one
`StageResults`, which `reviewer._compose` copies into the `ReviewResult` next to the verdict.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from kernelskill.review.results import (Check, CompileResult, CompileWarmup, ErrorKind, KernelUsage, Precision, Stage,
                                        TimingResult, VerifyResult)
from kernelskill.settings import ReviewSettings

PREBUILD_CALL_S = 30  # a prebuild's meta-device construction and call of ModelNew, builds aside


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Seeds(_Wire):
    """Every seed a review uses, drawn by the reviewer (secret unless the guard is off)."""

    init: int  # Model's and ModelNew's construction
    warm: int  # the warm-up inputs of the load stage and the first run
    trials: list[int]  # one per verify trial
    timing: list[int]  # one per timed input set
    reverify: list[int]  # the extra trials of a suspiciously large speedup
    order: int  # which side runs first in each trial (settings.order "random")
    profile_trial: int  # the trial run under the profiler (CUDA)


class ReviewRequest(_Wire):
    """One review (or, with mode "build", one prebuild; with mode "warm", one compile warm-up) for a worker."""

    problem_path: str
    problem_source: str  # the worker does not read the problem file again (the sandbox keeps it closed)
    candidate_path: str | None  # the candidate's file name, None for a candidate given as source only
    # the candidate runs from its source text alone: no file and no linecache entry behind it, so inspect and
    # TorchScript cannot read it back (how KernelBench's harness execs a CUDA candidate; --rules kernelbench)
    source_unreadable: bool = False
    candidate_source: str
    kernel_names: list[str]  # kernels the candidate defines, to find them among the profiler's kernels
    backend: str  # "triton", "cuda" or "none" (the candidate's, unless the settings name one)
    device: Literal["cuda", "cpu"]
    warmup: int
    iters: int
    settings: ReviewSettings
    seeds: Seeds
    mode: Literal["review", "build", "warm", "reference"] = "review"
    # after its stages the runner waits for the judge's commands (`Command`) instead of ending the review
    judged: bool = False
    # under turns (review/turns.py): before each stage the runner waits for the harness's `go`, which comes when the
    # device's turn is the stage's
    gated: bool = False
    arch: str | None = None  # build: the compute capability to build for ("9.0")
    prebuild_call_s: int = PREBUILD_CALL_S  # build: how long ModelNew may take on meta tensors
    log_path: str | None = None  # this review's log file, set by the worker pool
    log_fd: bool = False  # the log file was sent ahead over the worker's socket, as an open descriptor


class ExtensionPrebuild(_Wire):
    """One extension a prebuild built, found in the cache, or left to the review (failed outside the candidate's
    own code)."""

    name: str
    cache_hit: bool | None = None
    seconds: float | None = None
    steps: dict[str, float] | None = None
    failed_outside_own_code: str | None = None


class StageResults(_Wire):
    """What the stages found, reported piece by piece; a field no stage reported stays None."""

    device_name: str | None = None  # load
    compiled: bool | None = None  # compile
    compile: CompileResult | None = None
    verify: VerifyResult | None = None  # verify
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    weights: Literal["same_seed", "copied_by_name"] | None = None
    kernels: KernelUsage | None = None
    policy_violations: list[Check] | None = None
    backend_flags_changed: dict[str, str] | None = None
    precision: Precision | None = None  # verify: strict tolerance, output dtypes, the reference's TF32 switches
    timing: TimingResult | None = None  # time
    ref_ms: float | None = None
    candidate_ms: float | None = None
    speedup: float | None = None
    compile_ms: float | None = None
    speedup_vs_compile: float | None = None
    output_bytes: int | None = None  # verify: the most memory the candidate's outputs held (the hard floor's bytes)
    flags: list[str] | None = None  # any stage; merged, never replaced
    prebuild: list[ExtensionPrebuild] | None = None  # build mode
    prebuild_stopped: str | None = None  # build mode: why the module's code was not run to its end
    compile_warmup: CompileWarmup | None = None  # warm mode: torch.compile(Model)'s first call

    def merged(self, update: StageResults) -> StageResults:
        """These results with the fields `update` reports put in (a later report of a field wins; flags add up)."""
        fields = {name: getattr(update, name) for name in update.model_fields_set}
        if "flags" in fields:
            flags = list(self.flags or [])
            flags.extend(f for f in fields["flags"] or [] if f not in flags)
            fields["flags"] = flags
        return self.model_copy(update=fields)


class ReadyMessage(_Wire):
    type: Literal["ready"] = "ready"
    seconds: float  # the worker's start-up: torch, the device, the guards' snapshots
    device_name: str | None
    capability: str | None
    sandbox: dict[str, dict] = Field(default_factory=dict)  # layer -> its state (confine.apply)


class StageMessage(_Wire):
    type: Literal["stage"] = "stage"
    stage: Stage


class UpdateMessage(_Wire):
    type: Literal["update"] = "update"
    data: StageResults


class StageSecondsMessage(_Wire):
    type: Literal["stage_seconds"] = "stage_seconds"
    stage: str  # a stage, or "inputs": the problem's own cost of making input sets, inside the stages' seconds
    seconds: float


class VerdictMessage(_Wire):
    """The review failed: `kind` in `stage`, with what the verdict needs besides its message."""

    type: Literal["verdict"] = "verdict"
    stage: Stage
    kind: ErrorKind
    error: str
    max_abs_error: float | None = None  # mismatch
    max_rel_error: float | None = None
    checks: list[Check] = Field(default_factory=list)  # rejected
    compile_errors: str | None = None  # compile_error: the compiler's lines, trimmed


class AwaitingMessage(_Wire):
    """The runner's stages are over and it waits for the judge's commands on stdin."""

    type: Literal["awaiting"] = "awaiting"


class Command(_Wire):
    """One thing the judge asks of a runner that waits (review/judge.py): `outputs` (one call per seed, each output
    written to out_dir/<i>.out), the batch's three parts `prepare` (input sets from the seeds), `calls` (one call
    each, back to back: the part the judge's clock bounds) and `commit` (every output written), `baseline` (torch.compile
    of the reference made ready, before its timing), `time_reference` and `stateful` (reference runner only), `reserve` (candidate runner only, before its batch), `go` (a gated runner may
    start the stage it announced: review/turns.py) and `end`."""

    name: Literal["outputs", "inputs", "reserve", "prepare", "calls", "commit", "baseline", "time_reference", "stateful",
                  "go", "end"]
    seeds: list[int] = Field(default_factory=list)
    out_dir: str | None = None
    reserve_bytes: int = Field(default=0, ge=0, le=1 << 34)  # `reserve`, `prepare`: one call's outputs
    key: int | None = Field(default=None, ge=0, lt=1 << 63)  # `inputs`, `calls`: the batch's mask (exchange.py)
    graph: bool = False  # `prepare`: capture the batch's calls as a CUDA graph where they replay exactly (judged.py)


class CommandDone(_Wire):
    """A command's end: what the runner says of it (never a verdict: the judge checks the files and the time)."""

    type: Literal["command_done"] = "command_done"
    name: str
    info: dict = Field(default_factory=dict)
    error: str | None = None  # the command raised: what, in one line


class DoneMessage(_Wire):
    """The review is over; whether this process may serve another one, and if not, why."""

    type: Literal["done"] = "done"
    reusable: bool
    unfit: list[str] = Field(default_factory=list)


Message = Annotated[Union[ReadyMessage, StageMessage, UpdateMessage, StageSecondsMessage, VerdictMessage,
                          AwaitingMessage, CommandDone, DoneMessage], Field(discriminator="type")]
_MESSAGE = TypeAdapter(Message)


def encode(message: Message) -> str:
    """One JSON line; fields left unset are left out, so an update carries only what it reports."""
    return json.dumps({"type": message.type, **message.model_dump(mode="json", exclude_unset=True)}) + "\n"


def decode(line: bytes | str) -> Message | None:
    """The message on one line, or None for a line that is not one (it is skipped, as a torn or foreign write)."""
    try:
        return _MESSAGE.validate_json(line)
    except ValidationError:
        return None
