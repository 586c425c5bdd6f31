"""The one way from evidence to advice: `advise(kb, evidence)` -> Advice.

The decision table (decide.py) gives a bottleneck, a case and the methods it allows, ranked by expected gain
(ranking.py). advise() finishes the job for whoever asks - the optimization loop's Planner, `kernelskill memory
explain`, the decision benchmark and `kernelskill memory learn` all call it, so what is scored, what is explained and
what the Planner sees are one object:

1. the backend: the task's when the caller knows it, else the candidate's own (the `backend` code feature);
2. methods whose cue for that backend says "not applicable" are vetoed, each veto in the trace (decide() does this
   for the candidate's own backend already; a task may ask for another, e.g. a plain-PyTorch seed of a CUDA task);
3. when nothing is left (no case matched, or every method vetoed), every method not forbidden that applies to the
   backend is open, in the knowledge base's order, and `fallback` says so - the Planner is never left without a
   choice, and the trace never hides that the table gave none;
4. methods already tried on this kernel (evidence.tried) are carried into the advice; they keep their rank (the
   Planner reads their outcomes in its optimization memory and must say what differs before repeating one).
"""

from __future__ import annotations

from kernelskill.memory.knowledge import KnowledgeBase
from kernelskill.memory.policy.decide import decide
from kernelskill.memory.policy.evidence import Evidence
from kernelskill.memory.policy.trace import Advice, Decision, Veto

BACKENDS = ("cuda", "triton")
FALLBACK = "no decision-table case allowed a method for this kernel; every method not forbidden is open to the Planner"


def advise(kb: KnowledgeBase, evidence: Evidence, *, backend: str | None = None, kernel: str | None = None) -> Advice:
    """Advice on the hottest kernel of the evidence (or the one matching the regex `kernel`) for `backend` (None: the
    candidate's own, read from its code)."""
    decision = decide(kb, evidence, kernel)
    target = backend if backend is not None else _code_backend(evidence)
    if target is not None and target not in BACKENDS:
        target = None  # plain PyTorch: no kernel language whose cues could rule a method out
    allowed, vetoed = list(decision.allowed_methods), list(decision.vetoed)
    if target is not None:
        for m_id in list(allowed):
            method = kb.method(m_id)
            if method is not None and not method.cues.applicable(target):
                allowed.remove(m_id)
                vetoed.append(Veto(method=m_id, rule=f"not_applicable_to_{target}", why=getattr(method.cues, target)))
    fallback = None
    if not allowed:
        allowed = [m.id for m in kb.methods
                   if m.id not in decision.forbidden and (target is None or m.cues.applicable(target))]  # fmt: skip
        fallback = FALLBACK
    ranking = [r.model_copy(update={"rank": i}) for i, r in
               enumerate((r for r in decision.ranking if r.method in allowed), start=1)]  # fmt: skip
    fields = {name: getattr(decision, name) for name in Decision.model_fields}
    return Advice(**{**fields, "allowed_methods": allowed, "ranking": ranking, "vetoed": vetoed}, backend=target,
                  fallback=fallback, tried=list(evidence.tried), problem=evidence.problem)  # fmt: skip


def _code_backend(evidence: Evidence) -> str | None:
    fv = evidence.code_features.get("backend")
    return fv.value if fv is not None and fv.status == "ok" and isinstance(fv.value, str) else None
