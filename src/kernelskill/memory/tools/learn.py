"""A memory that learns: turn finished runs into proposed decision-table changes, with the evidence behind each.

    kernelskill memory learn RUN_DIR... --out proposal.yaml
    kernelskill memory validate --proposal proposal.yaml

For every optimization round of every task in the runs' stores (run.db) the round's decision (case, allowed
methods, code features), the method the Planner applied and the measured outcome are read: the gain is the new
kernel's speedup over its base kernel's (a kernel that failed and was repaired counts with the repaired speedup; one
never made correct counts as 0). Tries are grouped by (case, method), and

- rerank: a case whose methods, ordered by their median measured gain, come in another order than the table's:
  methods that won (median > 1, at least `min_tries` tries) first, highest first; then the untried ones in the
  table's order; then those that did not pay. A method outside the case's list that won is added (unless the case
  forbids it).
- new: rounds for which no case matched (the Planner chose among every method) give a new case for that bottleneck,
  gated by the code features true in all of them, allowing the methods that won.

Each proposed case is then tried on the rounds it was learned from: their evidence (the stored advice's code
features and problem, the base's stored profile) goes through `kernelskill.memory.advise` with the proposal merged,
the same function the loop asked, and `replayed` says where the tried method ranks before and after.

The proposal is data for a curator, never applied by itself: each case says what it would replace, with the tries,
gains and provenance (run, task, round, candidate) behind it. `memory validate --proposal` checks it against the
knowledge base: the proposed cases replace or join the table and the whole base is loaded and checked again.
"""

from __future__ import annotations

import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelskill.errors import KernelSkillError
from kernelskill.memory.knowledge import KnowledgeBase, default_knowledge_dir
from kernelskill.memory.knowledge.schema import Case
from kernelskill.memory.policy.advise import advise
from kernelskill.memory.policy.evidence import Evidence
from kernelskill.memory.policy.load import load_knowledge
from kernelskill.memory.policy.trace import Advice


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MethodEvidence(_Strict):
    method: str
    tries: int = Field(ge=1)
    correct: int = Field(ge=0)
    gains: list[float]  # one per try: speedup over the base (0 for a kernel never made correct)
    median_gain: float
    provenance: list[str]


class ProposedCase(_Strict):
    action: Literal["rerank", "new"]
    case: Case
    was: list[str] = []  # the table's allowed methods before (rerank)
    evidence: list[MethodEvidence]
    # the rounds it was learned from, advised again with the proposal merged: where the tried method ranks, before
    # -> after (rounds whose evidence was not stored are left out)
    replayed: list[str] = []


class Proposal(_Strict):
    source: str = "kernelskill memory learn"
    runs: list[str]
    min_tries: int = Field(ge=1)
    cases: list[ProposedCase]
    notes: list[str] = []


@dataclass
class _Try:
    gain: float
    correct: bool
    where: str
    features: dict[str, object] = field(default_factory=dict)
    evidence: Evidence | None = None  # what the round's advice was made on, when the store kept it
    backend: str | None = None


def learn(run_dirs: list[Path], kb: KnowledgeBase, min_tries: int = 2) -> Proposal:
    tries: dict[tuple[str | None, str, str], list[_Try]] = defaultdict(list)  # (case, bottleneck, method)
    runs, notes = [], []
    for run_dir in run_dirs:
        runs.append(_read_run(Path(run_dir), tries, notes))
    cases: list[ProposedCase] = []
    for (case_id, bottleneck, method), ts in sorted(tries.items(), key=lambda kv: str(kv[0])):
        if kb.method(method) is None:
            notes.append(f"method {method!r} ({len(ts)} tries) is not in the knowledge base; left out")
    by_case: dict[tuple[str | None, str], dict[str, list[_Try]]] = defaultdict(dict)
    for (case_id, bottleneck, method), ts in tries.items():
        if kb.method(method) is not None:
            by_case[(case_id, bottleneck)][method] = ts
    learned_from: list[dict[str, list[_Try]]] = []
    for (case_id, bottleneck), methods in sorted(by_case.items(), key=lambda kv: str(kv[0])):
        evidence = {m: _evidence(m, ts) for m, ts in methods.items()}
        if case_id is None:
            proposed = _new_case(bottleneck, methods, evidence, min_tries, kb, len(cases), notes)
        else:
            proposed = _rerank(case_id, evidence, min_tries, kb, notes)
        if proposed is not None:
            cases.append(proposed)
            learned_from.append(methods)
    proposal = Proposal(runs=runs, min_tries=min_tries, cases=cases, notes=notes)
    if cases:
        merged = apply_proposal(proposal, kb.directory)
        for pc, methods in zip(cases, learned_from, strict=True):
            replays = [_replay(kb, merged, m, t) for m, ts in methods.items() for t in ts if t.evidence is not None]
            pc.replayed = [line for line, _ in replays]
            if replays and not any(moved for _, moved in replays):
                proposal.notes.append(f"{pc.case.id}: with this proposal the advice on the rounds it was learned from "
                                      "does not change (the methods' gain rules, not the case's order, rank them "
                                      "there)")  # fmt: skip
    return proposal


def _replay(kb: KnowledgeBase, merged: KnowledgeBase, method: str, t: _Try) -> tuple[str, bool]:
    """'where: method #2 of 3 -> #1 of 3 (case c)', and whether the advice moved the method."""
    assert t.evidence is not None
    before, after = advise(kb, t.evidence, backend=t.backend), advise(merged, t.evidence, backend=t.backend)
    was, now = _rank(before, method), _rank(after, method)
    return f"{t.where}: {method} {was} -> {now} (case {after.case or 'none'})", was != now


def _rank(advice: Advice, method: str) -> str:
    if method in advice.allowed_methods:
        return f"#{advice.allowed_methods.index(method) + 1} of {len(advice.allowed_methods)}"
    return "forbidden" if method in advice.forbidden else "not allowed"


def _read_run(run_dir: Path, tries: dict, notes: list[str]) -> str:
    from kernelskill.store import RunStore

    store = RunStore.open(run_dir)
    try:
        run = store.latest_run()
        if run is None:
            notes.append(f"{run_dir}: the store holds no run")
            return str(run_dir)
        for task in store.tasks(run.id):
            candidates = store.candidates(task.id)
            by_round = {c.round_id: c for c in candidates if c.origin == "optimize"}
            children = defaultdict(list)
            for c in candidates:
                if c.parent_id is not None:
                    children[c.parent_id].append(c)
            decisions = {d.round_id: d for d in store.decisions(task.id)}
            for r in store.rounds(task.id):
                if r.branch != "optimize" or not r.method:
                    continue
                d, made = decisions.get(r.id), by_round.get(r.id)
                if d is None or made is None or d.candidate_id is None:
                    continue
                base = store.review_of(d.candidate_id)
                if base is None or not base.correct or not base.speedup:
                    continue
                speedup, fixed = _outcome(store, made, children)
                where = (f"{run_dir} run {run.id} task {task.name} round {r.idx} candidate {made.label}"
                         + (" (after repair)" if fixed else ""))  # fmt: skip
                features = {k: v.get("value") for k, v in d.decision.get("features", {}).items()
                            if v.get("status") == "ok" and v.get("mode") == "rule"}  # fmt: skip
                key = (d.case_id, d.bottleneck, r.method)
                tries[key].append(_Try(speedup / base.speedup if speedup else 0.0, bool(speedup), where, features,
                                       _stored_evidence(store, d), d.decision.get("backend")))
        return f"{run_dir} (run {run.id}, {run.kind}, {run.model})"
    finally:
        store.close()


def _stored_evidence(store, d) -> Evidence | None:
    """The evidence a stored advice was made on: the base's profile (ncu, profiler) with the advice's own code
    features and problem. None for a run stored before advice kept its problem, or one that does not read back."""
    if "backend" not in d.decision:  # written before advise(): its evidence cannot be rebuilt faithfully
        return None
    profile = store.profile_of(d.candidate_id)
    data = {**(profile.evidence if profile is not None else {}), "code_features": d.decision.get("features", {}),
            "problem": d.decision.get("problem"), "tried": d.decision.get("tried", [])}  # fmt: skip
    try:
        return Evidence.model_validate(data)
    except ValidationError:
        return None


def _outcome(store, made, children) -> tuple[float | None, bool]:
    """The speedup of the round's kernel, or of the first correct kernel repaired from it."""
    review = store.review_of(made.id)
    if review is not None and review.correct and review.speedup:
        return review.speedup, False
    queue = [c for c in children.get(made.id, []) if c.origin == "repair"]
    while queue:
        c = queue.pop(0)
        r = store.review_of(c.id)
        if r is not None and r.correct and r.speedup:
            return r.speedup, True
        queue += [k for k in children.get(c.id, []) if k.origin == "repair"]
    return None, False


def _evidence(method: str, ts: list[_Try]) -> MethodEvidence:
    gains = [round(t.gain, 4) for t in ts]
    return MethodEvidence(method=method, tries=len(ts), correct=sum(t.correct for t in ts), gains=gains,
                          median_gain=round(statistics.median(gains), 4), provenance=[t.where for t in ts])  # fmt: skip


def _order(current: list[str], evidence: dict[str, MethodEvidence], min_tries: int) -> list[str]:
    known = {m: e for m, e in evidence.items() if e.tries >= min_tries}
    won = sorted((m for m, e in known.items() if e.median_gain > 1),
                 key=lambda m: (-known[m].median_gain, current.index(m) if m in current else len(current)))
    lost = [m for m in current if m in known and m not in won]
    return won + [m for m in current if m not in known] + lost


def _rerank(case_id: str, evidence: dict[str, MethodEvidence], min_tries: int, kb: KnowledgeBase,
            notes: list[str]) -> ProposedCase | None:  # fmt: skip
    case = next((c for c in kb.decision_table if c.id == case_id), None)
    if case is None:
        notes.append(f"case {case_id!r} of the runs is not in the knowledge base (renamed?); its tries are left out")
        return None
    for m in [m for m in evidence if m in case.forbidden]:
        notes.append(f"{case_id}: {m} won {evidence[m].median_gain}x but the case forbids it; not added")
        evidence = {k: v for k, v in evidence.items() if k != m}
    new = _order(list(case.allowed), evidence, min_tries)
    if new == list(case.allowed):
        return None
    return ProposedCase(action="rerank", case=case.model_copy(update={"allowed": new}), was=list(case.allowed),
                        evidence=sorted(evidence.values(), key=lambda e: -e.median_gain))  # fmt: skip


def _new_case(bottleneck: str, methods: dict[str, list[_Try]], evidence: dict[str, MethodEvidence], min_tries: int,
              kb: KnowledgeBase, n: int, notes: list[str]) -> ProposedCase | None:  # fmt: skip
    won = _order([], evidence, min_tries)
    won = [m for m in won if evidence[m].median_gain > 1]
    if not won:
        return None
    all_tries = [t for ts in methods.values() for t in ts]
    bool_features = {f.id for f in kb.code_features if f.type == "bool" and f.mode == "rule"}
    common = sorted(f for f in bool_features if all(t.features.get(f) is True for t in all_tries))
    if not common:
        notes.append(f"no-match rounds of {bottleneck}: the winning methods share no code feature to gate a case on")
        return None
    tasks = {t.where.split(" round ")[0] for t in all_tries}
    gains = ", ".join(f"{m} {evidence[m].median_gain:g}x" for m in won)
    case = Case(id=f"learned_{bottleneck}_{n + 1}", bottleneck=bottleneck, structure=" and ".join(common),
                allowed=won, rationale=f"Learned by kernelskill memory learn from {len(all_tries)} tries in "
                f"{len(tasks)} task(s) where no case matched: {gains} (median speedup over the base).")  # fmt: skip
    return ProposedCase(action="new", case=case, evidence=[evidence[m] for m in won])


# ---- the proposal file and its validation ------------------------------------------------------------------------


def write_proposal(proposal: Proposal, path: Path) -> None:
    header = ("# A proposal of `kernelskill memory learn`: cases to re-rank or add, with the measured tries behind\n"
              "# them. Check it with `kernelskill memory validate --proposal THIS`; merge it by hand into\n"
              "# decision_table.yaml.\n")
    path.write_text(header + yaml.safe_dump(proposal.model_dump(mode="json", exclude_none=True), sort_keys=False,
                                            width=120, allow_unicode=True))  # fmt: skip


def load_proposal(path: str | Path) -> Proposal:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
        return Proposal.model_validate(data)
    except OSError as exc:
        raise KernelSkillError(f"{p}: cannot read the proposal: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise KernelSkillError(f"{p}: not valid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise KernelSkillError(f"{p}: {'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from None


def apply_proposal(proposal: Proposal, knowledge: Path | None = None) -> KnowledgeBase:
    """The knowledge base with the proposal's cases in its table (replaced by id, or before the bottleneck's
    catch-all case); raises KnowledgeBaseError / KernelSkillError naming every problem."""
    root = Path(knowledge) if knowledge is not None else default_knowledge_dir()
    problems = []
    for i, pc in enumerate(proposal.cases):
        e_methods = {e.method for e in pc.evidence}
        if any(e.correct > e.tries or len(e.gains) != e.tries for e in pc.evidence):
            problems.append(f"cases[{i}] ({pc.case.id}): tries, correct and gains do not agree")
        if pc.action == "rerank" and set(pc.was) - set(pc.case.allowed):
            problems.append(f"cases[{i}] ({pc.case.id}): a re-rank may reorder and add methods, not drop "
                            f"{', '.join(sorted(set(pc.was) - set(pc.case.allowed)))}")  # fmt: skip
        if not e_methods:
            problems.append(f"cases[{i}] ({pc.case.id}): no evidence")
    if problems:
        raise KernelSkillError("invalid proposal:\n  " + "\n  ".join(problems))
    with tempfile.TemporaryDirectory(prefix="kernelskill_proposal_") as tmp:
        for f in root.glob("*.yaml"):
            (Path(tmp) / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
        table_file = Path(tmp) / "decision_table.yaml"
        data = yaml.safe_load(table_file.read_text(encoding="utf-8"))
        table = data["decision_table"]
        for pc in proposal.cases:
            entry = pc.case.model_dump(mode="json", exclude_none=True)
            at = next((i for i, c in enumerate(table) if c["id"] == pc.case.id), None)
            if pc.action == "rerank":
                if at is None:
                    raise KernelSkillError(f"proposal: re-ranked case {pc.case.id!r} is not in the decision table")
                table[at] = entry
            else:
                if at is not None:
                    raise KernelSkillError(f"proposal: new case {pc.case.id!r} already exists in the decision table")
                same = [i for i, c in enumerate(table) if c["bottleneck"] == pc.case.bottleneck]
                catch_all = next((i for i in same if not any(g in table[i] for g in
                                                                 ("tiers", "signature", "structure", "conditions"))),
                                 None)  # fmt: skip
                table.insert(catch_all if catch_all is not None else (same[-1] + 1 if same else len(table)), entry)
        table_file.write_text(yaml.safe_dump(data, sort_keys=False, width=120), encoding="utf-8")
        return load_knowledge(tmp)
