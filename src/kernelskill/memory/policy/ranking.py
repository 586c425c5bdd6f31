"""Rank the allowed methods by their expected gain, estimated from the evidence (methods.yaml `gain` rules).

For each allowed method the first gain rule whose `when` is true and whose `estimate` can be computed gives the
expected speedup; it is capped by `method_ranking.cap` (the speedup the problem's floor leaves) when that is known.
Methods with an estimate above 1 come first, highest first; the others keep the case's order, which is the
curator's ranking. A method without an estimate says so ("no estimate"), with the rules that could not be
evaluated - an unknown gain is never read as a small one, it is only not used to move a method ahead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelskill.memory.policy.trace import ExprTrace, RankedMethod
from kernelskill.memory.knowledge.expr import Unknown, Value
from kernelskill.memory.knowledge import KnowledgeBase

Evaluate = Callable[[str, str, bool], ExprTrace]  # (knowledge key, trace id, boolean) -> trace


def rank_methods(
    kb: KnowledgeBase, env: dict[str, Value], allowed: list[str], evaluate: Evaluate
) -> list[RankedMethod]:
    cap = env.get(kb.method_ranking.cap)
    cap_value = float(cap) if isinstance(cap, int | float) and not isinstance(cap, bool) and cap > 0 else None
    estimated: list[RankedMethod] = []
    for position, m_id in enumerate(allowed):
        estimated.append(_estimate(kb, m_id, position, cap_value, evaluate))
    ahead = sorted((r for r in estimated if r.gain is not None and r.gain > 1), key=lambda r: (-r.gain, r.case_rank))
    rest = [r for r in estimated if r not in ahead]
    ranked = ahead + rest
    for i, r in enumerate(ranked, start=1):
        r.rank = i
    return ranked


def _estimate(kb: KnowledgeBase, m_id: str, position: int, cap: float | None, evaluate: Evaluate) -> RankedMethod:
    method = kb.method(m_id)
    unknown: list[str] = []
    for i, rule in enumerate(method.gain if method else []):
        key = f"methods.{m_id}.gain[{i}]"
        when = evaluate(f"{key}.when", f"{m_id}.gain[{i}].when", True)
        if when.state == "unknown":
            unknown.append(f"{rule.when} (missing: {', '.join(when.missing + when.undefined)})")
            continue
        if when.state != "true":
            continue
        est = evaluate(f"{key}.estimate", f"{m_id}.gain[{i}].estimate", False)
        if est.state == "unknown" or not _is_number(est.value):
            unknown.append(f"estimate {rule.estimate} (missing: {', '.join(est.missing + est.undefined)})")
            continue
        gain = float(est.value)
        capped = cap is not None and gain > cap
        inputs: dict[str, Any] = {**when.inputs, **est.inputs}
        return RankedMethod(method=m_id, case_rank=position + 1, gain=min(gain, cap) if capped else gain,
                            capped=capped, rule=f"gain[{i}]: {rule.when}", why=rule.why, inputs=inputs,
                            unknown_rules=unknown)  # fmt: skip
    why = "no gain rule applies; kept in the case's order" if not unknown else "no estimate: evidence is missing"
    return RankedMethod(method=m_id, case_rank=position + 1, gain=None, why=why, unknown_rules=unknown)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool | Unknown)
