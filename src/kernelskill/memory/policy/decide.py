"""The decision policy: a pure function from evidence to a Decision with its full trace.

normalize metrics -> run features and code features -> derived fields -> headroom tier -> predicates ->
bottleneck (first true priority rule, else the fallback) -> decision-table case (first true case of that
bottleneck, in file order) -> vetoes (global forbidden rules, methods not applicable to the backend) -> allowed.

Nothing is read as false for lack of evidence: an unknown value is carried as `Unknown` and reported. A rule or case
that cannot be evaluated is skipped but recorded, and a caveat says that a later one decided.
"""

from __future__ import annotations

import re
from typing import Any

from kernelskill.errors import KernelSkillError, KnowledgeBaseError
from kernelskill.memory.policy.trace import (
    CaseTrace, Decision, ExprTrace, FieldTrace, ForbiddenTrace, KernelSummary, RuleTrace, State, TierTrace, Veto,
)  # fmt: skip
from kernelskill.memory.policy.evidence import RUN_FEATURES, Evidence
from kernelskill.memory.knowledge.expr import ExprTypeError, Unknown, Value
from kernelskill.memory.knowledge import TIER_NAME, KnowledgeBase
from kernelskill.profiling.ncu import KernelRecord
from kernelskill.memory.policy.ranking import rank_methods
from kernelskill.memory.knowledge.schema import FieldSpec


def decide(kb: KnowledgeBase, evidence: Evidence, kernel: str | None = None) -> Decision:
    """Decide on the hottest kernel of the ncu report (or the one whose name matches the regex `kernel`)."""
    return _Run(kb, evidence, kernel).decide()


class _Run:
    def __init__(self, kb: KnowledgeBase, evidence: Evidence, kernel: str | None) -> None:
        self.kb, self.ev = kb, evidence
        self.env: dict[str, Value] = {}
        self.missing: set[str] = set()
        self.caveats: list[str] = []
        self.record = self._pick_kernel(kernel)

    def _pick_kernel(self, pattern: str | None) -> KernelRecord | None:
        report = self.ev.ncu if self.ev.ncu_status == "ok" else None
        if report is None or not report.kernels:
            if pattern is not None:
                raise KernelSkillError("--kernel needs ncu metrics (--metrics)")
            return None
        if pattern is None:
            return report.hottest
        found = [k for k in report.kernels if re.search(pattern, k.name)]
        if not found:
            names = ", ".join(k.name[:60] for k in report.kernels[:10])
            raise KernelSkillError(f"no kernel in {report.source} matches {pattern!r} (kernels: {names})")
        self.caveats.append(f"kernel chosen by --kernel {pattern!r}, not the hottest")
        return found[0]

    # ---- steps ----------------------------------------------------------------------------------------------------

    def decide(self) -> Decision:
        kb, ev = self.kb, self.ev
        if ev.ncu_status != "ok":
            note = f" ({ev.ncu_note})" if ev.ncu_note else ""
            self.caveats.append(f"ncu metrics: {ev.ncu_status}{note}; metric fields are unknown, the decision "
                                "rests on run and code features")  # fmt: skip
        if ev.profiler is None and ev.profiler_note:
            self.caveats.append(f"PyTorch profiler: {ev.profiler_note}; launch counts and the forward's idle time "
                                "are unknown")  # fmt: skip
        fields = [self._field(spec) for spec in kb.field_mapping]
        run = [self._run_feature(spec.id, spec.sources, spec.type) for spec in kb.run_features]
        features = dict(ev.code_features)
        for spec in kb.code_features:
            fv = features.get(spec.id)
            known = fv is not None and fv.status == "ok"
            self.env[spec.id] = fv.value if known else Unknown({spec.id})  # type: ignore[union-attr]
        derived = []
        for d in kb.derived_fields:
            t = self._eval(f"derived_fields.{d.id}.expr", d.id)
            self.env[d.id] = _to_value(t)
            derived.append(t)
        tier_trace = self._tier()
        predicates = {}
        for p in kb.predicates:
            t = self._eval(f"predicates.{p.id}.when", p.id, boolean=True)
            self.env[p.id] = _to_value(t)
            predicates[p.id] = t
        rules, bottleneck, by = self._bottleneck()
        cases, case = self._case(bottleneck)
        forbidden_rules, vetoed, forbidden, allowed = self._vetoes(case)
        ranking = rank_methods(kb, self.env, allowed, lambda key, ident, b: self._eval(key, ident, b, record=False))
        return Decision(
            kernel=self.record.name if self.record else None, kernels=self._kernels(), ncu_status=ev.ncu_status,
            ncu_note=ev.ncu_note, profiler=ev.profiler is not None, profiler_note=ev.profiler_note,
            code_path=ev.code_path, collection=list(ev.collection), fields=fields,
            run_features=run, features=features, derived=derived, tier=tier_trace.tier, tier_trace=tier_trace,
            predicates=predicates, priority_rules=rules, bottleneck=bottleneck, bottleneck_rule=by, cases=cases,
            case=case.id if case else None, case_status="matched" if case else "no_match",
            forbidden_rules=forbidden_rules, vetoed=vetoed, forbidden=forbidden,
            allowed_methods=[r.method for r in ranking], ranking=ranking, missing=sorted(self.missing),
            caveats=self.caveats,
        )  # fmt: skip

    def _kernels(self) -> list[KernelSummary]:
        if self.ev.ncu_status != "ok" or self.ev.ncu is None:
            return []
        return [KernelSummary(name=k.name, launches=k.launches, time_us=k.time_ns / 1e3, share=k.time_share)
                for k in self.ev.ncu.kernels]  # fmt: skip

    def _field(self, spec: FieldSpec) -> FieldTrace:
        if self.record is None:
            self.env[spec.id] = Unknown({spec.id})
            note = f"no ncu metrics ({self.ev.ncu_status})"
            return FieldTrace(id=spec.id, status="missing", unit=spec.unit_text, note=note)
        present, problems, status = [], [], "missing"
        for source in spec.sources:
            m = self.record.metrics.get(source)
            if m is None:
                continue
            if not isinstance(m.value, float):
                problems.append(f"{source} is not a number ({m.value!r})")
                status = "not_numeric"
            elif spec.units is not None and m.unit not in spec.units:
                problems.append(f"{source} is in {m.unit!r}, expected {spec.unit_text!r}")
                status = "unit_mismatch"
            elif spec.zero_is_no_data and m.value == 0:
                problems.append(f"{source} is 0, which ncu writes when the ratio has nothing to divide (no data)")
            else:
                present.append((source, m))
                if spec.combine == "first":
                    break
        if not present:
            self.env[spec.id] = Unknown({spec.id})
            note = "; ".join(problems) or f"not in the report (looked for {', '.join(spec.sources)})"
            return FieldTrace(id=spec.id, status=status, unit=spec.unit_text, note=note)  # type: ignore[arg-type]
        source, m = max(present, key=lambda p: p[1].value)  # one entry unless combine == "max"
        self.env[spec.id] = m.value
        note = f"largest of {', '.join(s for s, _ in present)}" if len(present) > 1 else None
        return FieldTrace(id=spec.id, value=m.value, status="ok", source=source, unit=m.unit, note=note)

    def _run_feature(self, fid: str, sources: list[str], ftype: str) -> FieldTrace:
        getters = RUN_FEATURES[fid]
        for source in sources:
            value = getters[source](self.ev, self.kb.kernel_name_patterns)
            if value is not None:
                if ftype != "per_kernel":
                    self.env[fid] = value
                return FieldTrace(id=fid, value=value, status="ok", source=source)
        if ftype != "per_kernel":
            self.env[fid] = Unknown({fid})
        return FieldTrace(id=fid, status="missing", note=f"no {' or '.join(sources)} evidence")

    def _eval(self, key: str, ident: str, boolean: bool = False, record: bool = True) -> ExprTrace:
        """Evaluate one expression; `record`: count its unknown inputs among the decision's missing evidence."""
        expr = self.kb.expr(key)
        try:
            v = expr.evaluate(self.env)
        except ExprTypeError as exc:
            raise KnowledgeBaseError(f"{self.kb.where(key)}: {exc}") from None
        inputs = {n: (None if isinstance(self.env[n], Unknown) else self.env[n]) for n in sorted(expr.names)}
        if isinstance(v, Unknown):
            if record:
                self.missing |= v.missing
            return ExprTrace(id=ident, expr=expr.source, state="unknown", missing=sorted(v.missing),
                             undefined=list(v.undefined), inputs=inputs)  # fmt: skip
        if boolean and not isinstance(v, bool):
            raise KnowledgeBaseError(f"{self.kb.where(key)}: {expr.source!r} gave {v!r}, not true/false")
        state = ("true" if v else "false") if isinstance(v, bool) and boolean else "value"
        return ExprTrace(id=ident, expr=expr.source, state=state, value=v, inputs=inputs)  # type: ignore[arg-type]

    def _tier(self) -> TierTrace:
        ht = self.kb.headroom_tiers
        v = self.env[ht.limiter]
        if isinstance(v, Unknown):
            self.env[TIER_NAME] = v
            why = ", ".join(sorted(v.missing) + list(v.undefined))
            return TierTrace(status="unknown", tier=None, limiter=ht.limiter, limiter_value=None,
                             note=f"the limiter {ht.limiter} is unknown ({why})")  # fmt: skip
        for t in ht.tiers:
            if t.min <= v < t.max:
                self.env[TIER_NAME] = t.id
                return TierTrace(status="assigned", tier=t.id, limiter=ht.limiter, limiter_value=v,
                                 note=f"{ht.limiter} = {v:.1f} is in [{t.min:g}, {t.max:g}): {t.description}")
        spans = ", ".join(f"{t.id} [{t.min:g}, {t.max:g})" for t in ht.tiers)
        note = f"{ht.limiter} = {v:.1f} is outside every tier ({spans}); no tier is assumed"
        self.env[TIER_NAME] = Unknown(undefined=(note,))
        self.caveats.append(note)
        return TierTrace(status="outside_tiers", tier=None, limiter=ht.limiter, limiter_value=v, note=note)

    def _bottleneck(self) -> tuple[list[RuleTrace], str, str | None]:
        pr = self.kb.bottleneck_priority_rules
        traces, chosen, unknown_before = [], None, []
        for r in pr.rules:
            t = self._eval(f"bottleneck_priority_rules.{r.id}.when", r.id, boolean=True)
            traces.append(RuleTrace(**t.model_dump(), bottleneck=r.bottleneck))
            if chosen is None:
                if t.state == "true":
                    chosen = r
                elif t.state == "unknown":
                    unknown_before.append(f"{r.id} (missing: {', '.join(t.missing + t.undefined)})")
        if unknown_before:
            decided = f"rule {chosen.id}" if chosen else f"the fallback {pr.fallback}"
            self.caveats.append(f"higher-priority rules could not be evaluated, so {decided} decided: "
                                + "; ".join(unknown_before))  # fmt: skip
        if chosen is None:
            return traces, pr.fallback, None
        return traces, chosen.bottleneck, chosen.id

    def _case(self, bottleneck: str) -> tuple[list[CaseTrace], Any]:
        traces, chosen, skipped = [], None, []
        for c in self.kb.decision_table:
            if c.bottleneck != bottleneck:
                continue
            gates: dict[str, State] = {}
            missing: set[str] = set()
            if c.tiers:
                tier = self.env[TIER_NAME]
                gates["tiers"] = "unknown" if isinstance(tier, Unknown) else ("true" if tier in c.tiers else "false")
                if isinstance(tier, Unknown):
                    missing |= tier.missing
            for gate in ("signature", "structure", "conditions"):
                if getattr(c, gate) is not None:
                    t = self._eval(f"decision_table.{c.id}.{gate}", f"{c.id}.{gate}", boolean=True)
                    gates[gate] = t.state  # type: ignore[assignment]
                    missing |= set(t.missing)
            states = set(gates.values())  # Kleene conjunction of the gates
            state: State = "false" if "false" in states else "unknown" if "unknown" in states else "true"
            selected = chosen is None and state == "true"
            if selected:
                chosen = c
            elif chosen is None and state == "unknown":
                skipped.append(c.id)
            traces.append(CaseTrace(id=c.id, state=state, gates=gates, missing=sorted(missing), selected=selected))
        if skipped:
            self.caveats.append(f"case(s) {', '.join(skipped)} could not be evaluated (missing evidence) and were "
                                "passed over")  # fmt: skip
        return traces, chosen

    def _vetoes(self, case: Any) -> tuple[list[ForbiddenTrace], list[Veto], list[str], list[str]]:
        allowed = list(case.allowed) if case else []
        forbidden = list(case.forbidden) if case else []
        vetoed: list[Veto] = []
        traces = []
        for g in self.kb.global_forbidden_rules:
            t = self._eval(f"global_forbidden_rules.{g.id}.when", g.id, boolean=True)
            applied = t.state == "true" or (t.state == "unknown" and g.on_unknown == "veto")
            note = "" if t.state != "unknown" else ("vetoed although unknown (on_unknown: veto)" if applied
                                                     else "not applied: unknown (on_unknown: keep)")  # fmt: skip
            traces.append(ForbiddenTrace(**t.model_dump(), forbid=g.forbid, applied=applied, note=note))
            if applied:
                for m in g.forbid:
                    if m in allowed:
                        allowed.remove(m)
                        vetoed.append(Veto(method=m, rule=g.id, why=g.why))
                    if m not in forbidden:
                        forbidden.append(m)
        backend = self.env.get("backend")
        if isinstance(backend, str) and backend in ("cuda", "triton"):
            for m_id in list(allowed):
                method = self.kb.method(m_id)
                if method is not None and not method.cues.applicable(backend):
                    allowed.remove(m_id)
                    vetoed.append(Veto(method=m_id, rule=f"not_applicable_to_{backend}",
                                       why=getattr(method.cues, backend)))  # fmt: skip
        return traces, vetoed, forbidden, allowed


def _to_value(t: ExprTrace) -> Value:
    if t.state == "unknown":
        return Unknown(set(t.missing), tuple(t.undefined))
    return t.value
