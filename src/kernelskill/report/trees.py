"""Each task's optimization tree: which kernel grew from which, how each fared, and why each optimization was tried.

The shape comes from run.db (every candidate's parent_id, every optimize round's decision) when the run folder has
one; the figures on the nodes always come from the task's history in results.json, so the tree agrees with the
tables. Without run.db the tree is rebuilt from the history alone, with the loop's own rules (an optimization grows
from the current base, a repair from the kernel that failed), and says so.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.errors import KernelSkillError
from kernelskill.report.results import BenchResults, TaskResult
from kernelskill.review.render import failure_reason
from kernelskill.store import DB_NAME, CandidateRow, DecisionRow, ReviewRow, RunStore
from kernelskill.loop.outcome import RoundRecord, repair_rank, verdict


@dataclass
class DecisionInfo:
    """What the decision policy concluded before an optimize round."""

    bottleneck: str
    case: str | None
    case_status: str | None
    allowed: list[str]
    forbidden: list[str]
    caveats: list[str]


@dataclass
class Node:
    label: str
    round: int | None
    slot: int = 0
    branch: str | None = None
    method: str | None = None
    verdict: str | None = None
    speedup: float | None = None  # from the history: eager time / this kernel's time
    promoted: str | None = None
    reason: str = ""  # why it failed, in one line: from the history, else from its review in run.db
    note: str = ""
    decision: DecisionInfo | None = None
    in_history: bool = True  # False: a kernel of a round the history does not hold (abandoned by a resume)
    children: list[Node] = field(default_factory=list)


@dataclass
class TaskTree:
    roots: list[Node]
    source: str  # "run.db" or "history"
    unproductive: list[RoundRecord] = field(default_factory=list)  # history lines that produced no kernel
    note: str | None = None  # why the tree was rebuilt from the history


TreeKey = tuple[str, str]  # (level, name): two levels may hold problems of the same name


def tree_key(task: TaskResult) -> TreeKey:
    return (task.level, task.name)


def task_trees(run_dir: Path, results: BenchResults) -> tuple[dict[TreeKey, TaskTree], str | None]:
    """A tree per task, and a note for the reader when run.db was absent or could not be read.

    A task's row in run.db is found by its `task_id`, else by its problem path, else by its name."""
    db = run_dir / DB_NAME
    trees: dict[TreeKey, TaskTree] = {}
    note = None
    why = "the run store holds no kernel of this task"
    if db.is_file():
        try:
            with RunStore.open_read_only(run_dir) as store:
                trees = _from_store(store, results)
        except (KernelSkillError, OSError, sqlite3.Error) as exc:  # a damaged or unreadable store: the history still tells a lot
            note = f"the run store could not be read ({exc}); trees are rebuilt from results.json's histories"
            why = "the run store could not be read"
    else:
        note = f"no {DB_NAME} in the run folder; trees are rebuilt from results.json's histories"
        why = f"no {DB_NAME}"
    for task in results.tasks:
        if tree_key(task) not in trees:
            trees[tree_key(task)] = tree_from_history(task)
            trees[tree_key(task)].note = why
    return trees, note


# ---- from the run store -----------------------------------------------------------------------------------------

def _from_store(store: RunStore, results: BenchResults) -> dict[TreeKey, TaskTree]:
    run_id = results.run.get("run_id")
    try:
        run = store.run(run_id) if isinstance(run_id, int) else store.latest_run()
    except LookupError:  # results.json names a run this store does not hold (copied from elsewhere?)
        run = store.latest_run()
    if run is None:
        return {}
    rows = store.tasks(run.id)
    by_id = {row.id: row for row in rows}
    by_path = {row.problem_path: row for row in rows}
    by_name = {row.name: row for row in rows}
    trees = {}
    for task in results.tasks:
        row = (by_id.get(task.task_id) if task.task_id is not None else None) or by_path.get(task.problem) \
            or by_name.get(task.name)
        if row is not None:
            candidates = store.candidates(row.id)
            if candidates:
                rounds = {r.id: r for r in store.rounds(row.id)}
                verdicts, reasons = {}, {}
                for c in candidates:
                    review = store.review_of(c.id)
                    if review is not None:
                        verdicts[c.id] = verdict(review.correct, review.error_kind)
                        if not review.correct:
                            reasons[c.id] = _review_reason(review)
                trees[tree_key(task)] = _tree(task, candidates, rounds, verdicts, store.decisions(row.id), reasons)
    return trees


def _review_reason(review: ReviewRow) -> str:
    checks = review.result.get("checks") or []
    check = checks[0].get("name") if review.error_kind == "rejected" and checks else None
    return failure_reason(review.error, check)


def _tree(task: TaskResult, candidates: Sequence[CandidateRow], rounds: dict, verdicts: dict[int, str],
          decisions: Sequence[DecisionRow], reasons: dict[int, str] | None = None) -> TaskTree:
    history = {rec.label: rec for rec in task.history if rec.label}
    decision_of_round = {d.round_id: _decision(d) for d in decisions if d.round_id is not None}
    nodes: dict[int, Node] = {}
    for c in candidates:
        rnd = rounds.get(c.round_id)
        rec = history.get(c.label)
        if rec is not None:
            node = _node(rec)
        else:
            node = Node(label=c.label, round=rnd.idx if rnd else None, branch=c.origin,
                        method=rnd.method if rnd else None, verdict=verdicts.get(c.id), in_history=False,
                        note="not in the task's history (a round abandoned by an interrupted run)")
        if not node.reason and node.verdict != "correct":  # a history written before rounds kept their reason
            node.reason = (reasons or {}).get(c.id, "")
        if c.origin == "optimize":
            node.decision = decision_of_round.get(c.round_id)
        nodes[c.id] = node
    roots = []
    for c in candidates:
        parent = nodes.get(c.parent_id) if c.parent_id is not None else None
        (parent.children if parent is not None else roots).append(nodes[c.id])
    return TaskTree(roots=roots, source="run.db", unproductive=_unproductive(task))


def _decision(row: DecisionRow) -> DecisionInfo:
    d = row.decision
    return DecisionInfo(bottleneck=row.bottleneck, case=row.case_id, case_status=d.get("case_status"),
                        allowed=list(row.allowed), forbidden=list(d.get("forbidden") or []),
                        caveats=list(d.get("caveats") or []))


# ---- from the history alone -------------------------------------------------------------------------------------

def tree_from_history(task: TaskResult) -> TaskTree:
    """Rebuild the tree from the history with the loop's rules: seeds are roots; an optimize round grows from the
    base of that moment (the latest kernel promoted to base); a repair from the kernel that failed last."""
    roots: list[Node] = []
    base: Node | None = None
    failing: Node | None = None
    seeds = [rec for rec in task.history if rec.round == 0 and rec.label]
    for rec in seeds:
        node = _node(rec)
        roots.append(node)
        if "base" in (rec.promoted or ""):
            base = node
    if base is None and seeds:
        failed = [n for n in roots if n.verdict != "correct"]
        failing = min(failed, key=lambda n: repair_rank(n.verdict)) if failed else None
    for rec in task.history:
        if rec.round == 0 or not rec.label:
            continue
        node = _node(rec)
        parent = failing if rec.branch == "repair" else base if rec.branch == "optimize" else None
        (parent.children if parent is not None else roots).append(node)
        if node.verdict == "correct":
            failing = None
            if "base" in (node.promoted or ""):
                base = node
        else:
            failing = node
        if node.note.startswith("gave up"):  # the loop dropped the repair chain and went back to the base
            failing = None
    return TaskTree(roots=roots, source="history", unproductive=_unproductive(task))


def _node(rec: RoundRecord) -> Node:
    return Node(label=rec.label or "", round=rec.round, slot=rec.slot, branch=rec.branch, method=rec.method,
                verdict=rec.verdict, speedup=rec.speedup, promoted=rec.promoted, reason=rec.reason, note=rec.note)


def _unproductive(task: TaskResult) -> list[RoundRecord]:
    return [rec for rec in task.history if not rec.label]
