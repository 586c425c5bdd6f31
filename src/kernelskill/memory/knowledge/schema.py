"""The shape of the knowledge base: one pydantic model per YAML section.

Every model forbids unknown keys, so a misspelt key is reported instead of silently ignored. Cross-references
(a case naming a method that does not exist, an expression reading an undefined name, ...) are checked in
knowledge.py once all sections are loaded.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Id = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldSpec(_Strict):
    """A standard field read from Nsight Compute metrics of the hottest kernel."""

    id: Id
    description: str
    sources: list[str] = Field(min_length=1)  # raw metric names; later ones are alternatives (renamed metrics)
    combine: Literal["first", "max"] = "first"  # first present source, or the largest of those present
    # canonical unit(s) the sources may have (e.g. "%", "nsecond", ["byte", "byte/block"]); None: any
    unit: str | list[str] | None = None
    # ncu writes 0 for a ratio whose denominator is 0 (bytes per sector of global loads when every load is an
    # LDGSTS/TMA copy); for such a field 0 means "no data", not a measured zero.
    zero_is_no_data: bool = False

    @property
    def units(self) -> list[str] | None:
        return [self.unit] if isinstance(self.unit, str) else self.unit

    @property
    def unit_text(self) -> str | None:
        return " or ".join(self.units) if self.units else None


class RunFeatureSpec(_Strict):
    """A feature of the run measured outside the kernel (PyTorch profiler, the ncu report as a whole)."""

    id: Id
    definition: str
    type: Literal["int", "float", "bool", "per_kernel"]  # per_kernel: a table for the trace, not for expressions
    sources: list[Literal["torch_profiler", "ncu", "problem"]] = Field(min_length=1)  # in order of preference


class CodeFeatureSpec(_Strict):
    """A static feature of the candidate's source."""

    id: Id
    definition: str
    type: Literal["bool", "int", "enum"]
    values: list[str] | None = None  # enum only
    range: tuple[int, int] | None = None  # int only, inclusive
    mode: Literal["rule", "llm"]
    cuda: str = Field(min_length=3)  # how the feature shows in CUDA C++ sources
    triton: str = Field(min_length=3)  # ... and in Triton sources


class DerivedSpec(_Strict):
    id: Id
    expr: str
    description: str
    unit: str | None = None


class TierSpec(_Strict):
    id: str = Field(pattern=r"^[A-Z][A-Za-z0-9_]*$", max_length=16)
    min: float  # inclusive
    max: float  # exclusive
    description: str


class HeadroomTiers(_Strict):
    limiter: str  # a field or derived field, percent of the nearest ceiling
    tiers: list[TierSpec] = Field(min_length=1)


class BottleneckSpec(_Strict):
    id: Id
    description: str
    signature: str  # the metric picture in words, for humans and the Planner


class PriorityRule(_Strict):
    id: Id
    bottleneck: str
    when: str
    why: str


class PriorityRules(_Strict):
    rules: list[PriorityRule] = Field(min_length=1)  # first rule that is true names the bottleneck
    fallback: str  # bottleneck when no rule is true


class PredicateSpec(_Strict):
    id: Id
    when: str
    description: str


class ForbiddenRule(_Strict):
    id: Id
    when: str
    forbid: list[str] = Field(min_length=1)
    why: str
    on_unknown: Literal["keep", "veto"] = "keep"  # what to do when `when` cannot be evaluated


class Case(_Strict):
    id: Id
    bottleneck: str
    tiers: list[str] | None = None  # None: any tier (also when the tier is unknown)
    signature: str | None = None  # metric gate
    structure: str | None = None  # code-structure gate
    conditions: str | None = None  # anything else (run features, occupancy limits, ...)
    allowed: list[str] = Field(min_length=1)  # in order of expected payoff
    forbidden: list[str] = []
    rationale: str


class MetricChange(_Strict):
    field: str
    direction: Literal["up", "down", "same"]
    note: str = ""


class Cues(_Strict):
    """Implementation cues per backend; a cue starting with "not applicable" says why the method does not apply."""

    cuda: str = Field(min_length=3)
    triton: str = Field(min_length=3)

    def applicable(self, backend: str) -> bool:
        cue = getattr(self, backend, None)
        return cue is None or not cue.lower().startswith("not applicable")


class GainRule(_Strict):
    """One estimate of a method's speedup: the first rule whose `when` is true gives `estimate` (an expression)."""

    when: str
    estimate: str  # evaluates to a number, the expected speedup factor (1.0 = no gain)
    why: str  # the evidence behind the estimate, for the Planner and the trace


class MethodSpec(_Strict):
    id: Id
    name: str
    intent: str
    preconditions: list[str] = Field(min_length=1)
    expected_metric_change: list[MetricChange] = Field(min_length=1)
    forbidden_patterns: list[str] = Field(min_length=1)
    cues: Cues
    gain: list[GainRule] = []  # how much it is expected to pay, from the evidence; ranks the allowed methods


class MethodRanking(_Strict):
    cap: str  # a derived field: the largest speedup the evidence leaves (estimates are capped by it when known)


SECTIONS: dict[str, object] = {
    "field_mapping": list[FieldSpec],
    "kernel_name_patterns": dict[str, list[str]],  # "library" / "gemm" -> regexes over kernel names
    "run_features": list[RunFeatureSpec],
    "code_features": list[CodeFeatureSpec],
    "derived_fields": list[DerivedSpec],
    "headroom_tiers": HeadroomTiers,
    "bottleneck_types": list[BottleneckSpec],
    "predicates": list[PredicateSpec],
    "bottleneck_priority_rules": PriorityRules,
    "global_forbidden_rules": list[ForbiddenRule],
    "decision_table": list[Case],
    "methods": list[MethodSpec],
    "method_ranking": MethodRanking,
}
