"""What the loop hands the agents: typed, prompt-ready facts. The agents render them through templates; the loop
builds them from the Reviewer's results, the decision policy and the short-term memory.

These types are the contract between `kernelskill.loop` (which fills them) and `kernelskill.agents` (which turns
them into prompts). Everything here is plain data so it can also be stored and shown.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelskill.memory.knowledge.schema import MethodSpec

Backend = Literal["triton", "cuda"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskBrief(_Data):
    """The problem being optimized."""

    name: str  # e.g. "gelu_chain" (file stem)
    source: str  # the reference program, KernelBench format
    backend: Backend
    device: str  # "cuda" or "cpu"; on "cpu" Triton kernels run in Triton's interpreter
    device_name: str | None = None  # e.g. "NVIDIA H200"
    # the Reviewer's settings the candidate must satisfy (defaults: the paper's protocol, own-kernels policy on)
    allow_torch_ops: bool = False  # True: PyTorch compute ops may do (part of) the work
    atol: float = 1e-2
    rtol: float = 1e-2


class ReviewFeedback(_Data):
    """A review as the agents see it: the verdict, and for a failure the Reviewer's own words (never trimmed away:
    compiler, verifier and profiler output is the agents' most useful feedback)."""

    correct: bool
    stage: str | None = None  # the stage that failed: compile / verify / time …; None when correct
    error_kind: str | None = None  # compile_error, mismatch, runtime_error, timeout, rejected, crash …
    error: str | None = None  # the Reviewer's message, compiler errors or mismatch summary included
    log_tail: str | None = None  # the last lines of the worker log, when they add something
    speedup: float | None = None  # vs PyTorch eager, when timed
    ref_ms: float | None = None
    candidate_ms: float | None = None
    checks: list[str] = Field(default_factory=list)  # anti-cheating checks that fired, "name: detail"
    flags: list[str] = Field(default_factory=list)


class RepairStep(_Data):
    """One link of a repair chain: a failing kernel, what the Diagnoser said about it and what came of the fix."""

    label: str  # the candidate's label, e.g. "round-04"
    feedback: ReviewFeedback  # why this kernel failed
    diagnosis: Diagnosis | None = None  # the Diagnoser's reading (None for the kernel that started the chain)
    outcome: str | None = None  # what the repair produced, in words ("still fails to compile: …"), None if pending


class Diagnosis(_Data):
    """The Diagnoser's reply. Extra fields a model adds are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    critical_issue: str
    root_cause: str
    evidence: str | list[str]
    fix: str | list[str]


class Plan(_Data):
    """The Planner's reply. Extra fields a model adds are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    bottleneck: str
    method: str  # a method id from the knowledge base (must be an allowed one when long-term memory is on)
    plan: str | list[str]  # the steps
    evidence: str | list[str]
    expected_metric_change: str | list[str] | dict[str, str]
    # how this try differs from an earlier attempt of the same method (required by the agents when it repeats one)
    what_differs: str | None = None


class Attempt(_Data):
    """One optimization tried on the current base kernel: the optimization memory the Planner sees."""

    label: str  # the candidate's label
    method: str
    plan: str  # the plan, condensed to text
    outcome: Literal["promoted", "improved", "not_faster", "failed"]
    speedup: float | None = None  # of the resulting kernel vs eager (None when it failed)
    base_speedup: float | None = None  # of the base it started from
    detail: str = ""  # e.g. the error that ended it, or "fixed after 2 repairs"


class RankedMethodBrief(_Data):
    """One allowed method with the gain the policy expects from it and the evidence behind the estimate."""

    method: str
    gain: float | None = None  # expected speedup factor; None: no estimate
    why: str = ""


class DecisionBrief(_Data):
    """The decision policy's result, condensed for the Planner (the full trace goes to the run store)."""

    bottleneck: str
    case: str | None  # matched decision-table case; None: no case matched
    tier: str | None = None
    allowed_methods: list[str]  # in the order of expected payoff
    ranked: list[RankedMethodBrief] = Field(default_factory=list)  # the same methods with gain and why, when ranked
    forbidden_methods: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)  # key metric values and predicates, "name = value"
    caveats: list[str] = Field(default_factory=list)


class PlanContext(_Data):
    task: TaskBrief
    base_label: str
    base_source: str
    base_feedback: ReviewFeedback  # the base's review (correct, with its timing)
    # long-term memory (None when switched off: the Planner then chooses any method freely)
    decision: DecisionBrief | None = None
    methods: list[MethodSpec] | None = None  # cards of the methods the Planner may choose among
    # short-term memory (None when switched off)
    attempts: list[Attempt] | None = None


class OptimizeContext(_Data):
    task: TaskBrief
    base_label: str
    base_source: str
    base_feedback: ReviewFeedback
    plan: Plan
    method: MethodSpec | None = None  # the chosen method's card, when it is a known method


class RepairContext(_Data):
    """For both the Diagnoser and the Repairer. `chain` holds the earlier links (empty without short-term memory);
    the kernel to fix is `failing_source`, whose review is `feedback`."""

    task: TaskBrief
    failing_label: str
    failing_source: str
    feedback: ReviewFeedback
    chain: list[RepairStep] = Field(default_factory=list)
    goal: str | None = None  # what the failing kernel was trying to do (the plan of the optimization it came from)


RepairStep.model_rebuild()
