"""The Decision and its trace: what the policy returns, what the CLI prints and what goes into JSON and prompts.

Three-valued results are spelt "true" / "false" / "unknown" so they survive JSON without being read as booleans.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from kernelskill.memory.features.extract import FeatureValue
from kernelskill.memory.policy.evidence import TriedMethod
from kernelskill.review.work import ProblemWork
from kernelskill.profiling.summary import NcuStatus

State = Literal["true", "false", "unknown"]


class KernelSummary(BaseModel):
    name: str
    launches: int
    time_us: float
    share: float


class FieldTrace(BaseModel):
    """A normalized metric field or a run feature: its value and where it came from (or why it is missing)."""

    id: str
    value: Any = None
    status: Literal["ok", "missing", "unit_mismatch", "not_numeric"]
    source: str | None = None  # the raw ncu metric name, or "torch_profiler" / "ncu" for run features
    unit: str | None = None
    note: str | None = None


class ExprTrace(BaseModel):
    """One evaluated expression: a derived field, a predicate, a rule or a case gate."""

    id: str
    expr: str
    state: State | Literal["value"]  # "value": a derived field with a known value
    value: Any = None
    missing: list[str] = []  # evidence names that were unknown
    undefined: list[str] = []  # other reasons (division by zero, limiter outside the tiers)
    inputs: dict[str, Any] = {}  # every name read, with its value (None when unknown)


class TierTrace(BaseModel):
    status: Literal["assigned", "unknown", "outside_tiers"]
    tier: str | None
    limiter: str
    limiter_value: float | None
    note: str


class RuleTrace(ExprTrace):
    bottleneck: str


class CaseTrace(BaseModel):
    id: str
    state: State
    gates: dict[str, State]  # tiers / signature / structure / conditions, those the case has
    missing: list[str] = []
    selected: bool = False


class ForbiddenTrace(ExprTrace):
    forbid: list[str]
    applied: bool
    note: str = ""


class Veto(BaseModel):
    method: str
    rule: str
    why: str


class RankedMethod(BaseModel):
    """An allowed method with its expected gain and the evidence behind it (ranking.py)."""

    method: str
    rank: int = 0  # 1 = most promising
    case_rank: int  # its place in the matched case's list (the curator's order)
    gain: float | None = None  # expected speedup factor; None: no estimate
    capped: bool = False  # the estimate was cut to the speedup the problem's floor leaves
    rule: str | None = None  # the gain rule that gave the estimate
    why: str = ""
    inputs: dict[str, Any] = {}
    unknown_rules: list[str] = []  # gain rules passed over for lack of evidence


class Decision(BaseModel):
    # evidence
    kernel: str | None  # the kernel whose metrics drove the decision (hottest by time)
    kernels: list[KernelSummary]
    ncu_status: NcuStatus
    ncu_note: str | None = None
    profiler: bool
    profiler_note: str | None = None
    code_path: str | None = None
    collection: list[str] = []  # how the evidence was gathered (when profiled here)
    # workflow steps, in order
    fields: list[FieldTrace]
    run_features: list[FieldTrace]
    features: dict[str, FeatureValue]
    derived: list[ExprTrace]
    tier: str | None
    tier_trace: TierTrace
    predicates: dict[str, ExprTrace]
    priority_rules: list[RuleTrace]
    bottleneck: str
    bottleneck_rule: str | None  # None: no rule was true, the fallback bottleneck applies
    cases: list[CaseTrace]
    case: str | None
    case_status: Literal["matched", "no_match"]
    forbidden_rules: list[ForbiddenTrace]
    vetoed: list[Veto]
    forbidden: list[str]  # methods the Planner must not use (case list and applied global rules)
    allowed_methods: list[str]  # ranked: most promising first (see `ranking`)
    ranking: list[RankedMethod] = []  # the allowed methods with their expected gain and why, in rank order
    missing: list[str]  # evidence names that were unknown in some evaluated expression of this trace
    caveats: list[str]  # plain-language warnings about how far to trust the decision


class Advice(Decision):
    """The decision as it is handed on: to the Planner, to `memory explain`, to the decision benchmark and to `memory
    learn` alike (advise.py). `allowed_methods` and `ranking` are what the Planner is shown."""

    backend: str | None = None  # the backend the methods are for (the task's, else the candidate's own)
    fallback: str | None = None  # set when no case left a method: why every method not forbidden is open instead
    tried: list[TriedMethod] = []  # methods already tried on this kernel, with their outcome
    problem: ProblemWork | None = None  # the problem's work the floor came from (with the profile and the features
    # stored beside it, `memory learn` can advise on the same evidence again)
