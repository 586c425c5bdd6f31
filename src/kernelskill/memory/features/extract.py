"""Code features of a candidate: rule features from code_rules.py, llm features from an LLM judge.

The LLM client arrives with the agents; until one is passed in, llm-mode features are reported as unknown with the
reason, never guessed. When a judge is given, each answer is validated against the feature's declared type and
range (booleans parsed, integers clamped into range, enum values checked); an answer that does not fit is reported
as unknown with the raw answer, so a bad reply cannot steer the policy.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel

from kernelskill.memory.features.codeview import SourceView
from kernelskill.memory.features.rules import RULES
from kernelskill.memory.knowledge.schema import CodeFeatureSpec


class FeatureValue(BaseModel):
    """A code feature's value, or why it is unknown."""

    value: bool | int | str | None
    mode: Literal["rule", "llm"]
    status: Literal["ok", "unknown"]
    reason: str | None = None


class FeatureJudge(Protocol):
    """Answers one llm-mode feature for a source; returns the raw answer (validated by the caller)."""

    def judge_feature(self, feature: CodeFeatureSpec, source: str) -> object: ...


def extract_features(
    specs: list[CodeFeatureSpec], view: SourceView, judge: FeatureJudge | None = None
) -> dict[str, FeatureValue]:
    out: dict[str, FeatureValue] = {}
    for spec in specs:
        if spec.mode == "rule":
            out[spec.id] = FeatureValue(value=RULES[spec.id](view), mode="rule", status="ok")
        elif judge is None:
            out[spec.id] = FeatureValue(value=None, mode="llm", status="unknown",
                                        reason="llm-mode feature and no LLM client is configured")  # fmt: skip
        else:
            out[spec.id] = _ask(judge, spec, view)
    return out


def unknown_features(specs: list[CodeFeatureSpec], reason: str) -> dict[str, FeatureValue]:
    """Every feature unknown, e.g. when no candidate source was given."""
    return {s.id: FeatureValue(value=None, mode=s.mode, status="unknown", reason=reason) for s in specs}


def _ask(judge: FeatureJudge, spec: CodeFeatureSpec, view: SourceView) -> FeatureValue:
    try:
        raw = judge.judge_feature(spec, view.text)
    except Exception as exc:  # noqa: BLE001 - any client failure is recorded in the trace, the run goes on
        return FeatureValue(value=None, mode="llm", status="unknown",
                            reason=f"the LLM judge failed: {type(exc).__name__}: {exc}")  # fmt: skip
    try:
        value = clamp_feature_value(spec, raw)
    except ValueError as exc:
        return FeatureValue(value=None, mode="llm", status="unknown", reason=f"rejected LLM answer {raw!r}: {exc}")
    return FeatureValue(value=value, mode="llm", status="ok")


def clamp_feature_value(spec: CodeFeatureSpec, raw: object) -> bool | int | str:
    """Coerce an answer to the feature's type; ValueError when it cannot be."""
    if spec.type == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "yes", "1"):
            return True
        if text in ("false", "no", "0"):
            return False
        raise ValueError("expected true or false")
    if spec.type == "int":
        try:
            number = int(float(str(raw).strip()))
        except ValueError:
            raise ValueError("expected an integer") from None
        low, high = spec.range or (number, number)
        return min(max(number, low), high)
    text = str(raw).strip().strip("'\"").lower()
    if text not in (spec.values or []):
        raise ValueError(f"expected one of {', '.join(spec.values or [])}")
    return text
