"""The run store: one SQLite database per run folder that records everything `optimize` and `bench` do.

A run folder DIR holds DIR/run.db and DIR/kernels/<task>/<label>.py (every kernel source ever reviewed, also kept in
the database). Every write commits at once, so a crash or a kill loses nothing already written and a run can be
resumed from its last finished round. One connection serves all threads (seeds are generated concurrently) behind a
lock; WAL mode and a busy timeout let several processes share the file (db.py opens it; schema.py migrates it).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelskill import __version__
from kernelskill.errors import KernelSkillError
from kernelskill.folders import write_atomically
from kernelskill.store import db
from kernelskill.store.db import RowT, safe_name
from kernelskill.store.rows import (
    Branch,
    CandidateRow,
    DecisionRow,
    LLMCallRow,
    Origin,
    ProfileRow,
    ReviewPurpose,
    ReviewRow,
    RoundRow,
    RoundStatus,
    RunKind,
    RunRow,
    RunStatus,
    TaskRow,
    TaskStatus,
)

DB_NAME = "run.db"
KERNELS_DIR = "kernels"

_ENDED_RUN = ("finished", "interrupted", "failed")
_ENDED_TASK = ("finished", "failed")
# ReviewResult fields copied into their own columns, so a run can be queried without parsing result_json
_REVIEW_COLUMNS = ("stage", "error_kind", "error", "speedup", "ref_ms", "candidate_ms", "compile_ms",
                   "speedup_vs_compile")


class RunStore:
    """The records of one run folder. Open it with `create` (a new run) or `open` (resume, inspect)."""

    def __init__(self, run_dir: Path, conn: sqlite3.Connection) -> None:
        """Use `create` or `open`: they prepare the connection this wraps."""
        self.run_dir = run_dir
        self.db_path = run_dir / DB_NAME
        self._conn = conn
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.Lock()  # one connection, many threads: every method holds this
        self._closed = False

    @classmethod
    def create(cls, run_dir: Path) -> RunStore:
        """Make the folder and an empty store in it; refuse a folder that already holds a run."""
        run_dir = Path(run_dir)
        db_path = run_dir / DB_NAME
        if db_path.exists():
            raise KernelSkillError(
                f"{run_dir} already holds a run ({db_path}): pass --resume to continue it, or choose another --out"
            )
        return cls(db.make_run_folder(run_dir), db.connect(db_path, create=True))

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        """Open the store of an existing run folder, upgrading its schema if it was written by an older version."""
        run_dir = Path(run_dir)
        db_path = run_dir / DB_NAME
        if not db_path.is_file():
            raise KernelSkillError(
                f"no run store at {db_path}: nothing to resume; start a run with --out {run_dir}"
            )
        return cls(run_dir, db.connect(db_path, create=False))

    @classmethod
    def open_read_only(cls, run_dir: Path) -> RunStore:
        """Open an existing run's store to read it (the report), even in a folder this process cannot write."""
        run_dir = Path(run_dir)
        db_path = run_dir / DB_NAME
        if not db_path.is_file():
            raise KernelSkillError(f"no run store at {db_path}")
        return cls(run_dir, db.connect_read_only(db_path))

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._conn.close()
                self._closed = True

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunStore({str(self.run_dir)!r})"

    # ---- runs

    def add_run(self, kind: RunKind, model: str, config: dict) -> int:
        db.check("run kind", kind, RunKind)
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO runs (kind, created_at, status, model, config_json, kernelskill_version) "
                "VALUES (?, ?, 'running', ?, ?, ?)",
                (kind, db.now(), model, db.dumps(config), __version__),
            ).lastrowid

    def run(self, run_id: int) -> RunRow:
        return self._get("runs", run_id, RunRow)

    def latest_run(self) -> RunRow | None:
        return self._first(RunRow, "SELECT * FROM runs ORDER BY id DESC LIMIT 1", ())

    def update_run_config(self, run_id: int, config: dict) -> None:
        """Replace a run's config: a resume that asked for more rounds or a larger budget records them, so the next
        resume keeps them too."""
        self._update("runs", run_id, "UPDATE runs SET config_json = ? WHERE id = ?", (db.dumps(config), run_id))

    def set_run_status(self, run_id: int, status: RunStatus) -> None:
        """Set the status; an ended status stamps finished_at, 'running' (a resumed run) clears it."""
        db.check("run status", status, RunStatus)
        finished_at = db.now() if status in _ENDED_RUN else None
        self._update("runs", run_id, "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?",
                     (status, finished_at, run_id))

    # ---- tasks

    def add_task(self, run_id: int, name: str, problem_path: str, problem_source: str) -> int:
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO tasks (run_id, name, problem_path, problem_sha256, problem_source, status) "
                "VALUES (?, ?, ?, ?, ?, 'pending')",
                (run_id, name, problem_path, db.sha256(problem_source), problem_source),
            ).lastrowid

    def task(self, task_id: int) -> TaskRow:
        return self._get("tasks", task_id, TaskRow)

    def tasks(self, run_id: int) -> list[TaskRow]:
        return self._all(TaskRow, "SELECT * FROM tasks WHERE run_id = ? ORDER BY id", (run_id,))

    def find_task(self, run_id: int, name: str) -> TaskRow | None:
        return self._first(TaskRow, "SELECT * FROM tasks WHERE run_id = ? AND name = ?", (run_id, name))

    def set_task_status(
        self, task_id: int, status: TaskStatus, *, reason: str | None = None, summary: dict | None = None
    ) -> None:
        """Set the status and its reason (None clears an old one). `summary` replaces the stored one when given.

        The first 'running' stamps started_at; 'finished' or 'failed' stamps finished_at, any other status clears it.
        """
        db.check("task status", status, TaskStatus)
        now = db.now()
        self._update(
            "tasks", task_id,
            "UPDATE tasks SET status = ?, reason = ?, summary_json = COALESCE(?, summary_json), "
            "started_at = CASE WHEN ? = 'running' THEN COALESCE(started_at, ?) ELSE started_at END, "
            "finished_at = ? WHERE id = ?",
            (status, reason, None if summary is None else db.dumps(summary), status, now,
             now if status in _ENDED_TASK else None, task_id),
        )

    def set_task_kernels(self, task_id: int, *, best: int | None, base: int | None) -> None:
        """Record the task's best candidate and the one the next round builds on (None clears either)."""
        self._update("tasks", task_id,
                     "UPDATE tasks SET best_candidate_id = ?, base_candidate_id = ? WHERE id = ?",
                     (best, base, task_id))

    # ---- rounds

    def start_round(self, task_id: int, idx: int, branch: Branch) -> int:
        db.check("round branch", branch, Branch)
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO rounds (task_id, idx, branch, status, started_at) VALUES (?, ?, ?, 'running', ?)",
                (task_id, idx, branch, db.now()),
            ).lastrowid

    def finish_round(
        self, round_id: int, status: RoundStatus, *, method: str | None = None, note: str | None = None,
        outcome: dict | None = None, state: dict | None = None,
    ) -> None:
        """Close a round. `state` is the loop's snapshot after it: what `last_state` hands a resumed run."""
        if status == "running":
            raise ValueError("finish_round needs an ended status ('done', 'failed' or 'abandoned'), not 'running'")
        db.check("round status", status, RoundStatus)
        self._update(
            "rounds", round_id,
            "UPDATE rounds SET status = ?, method = ?, note = ?, outcome_json = ?, state_json = ?, finished_at = ? "
            "WHERE id = ?",
            (status, method, note, db.dumps_opt(outcome), db.dumps_opt(state), db.now(), round_id),
        )

    def abandon_unfinished_rounds(self, task_id: int) -> int:
        """Mark the rounds a crash or a kill left 'running' as 'abandoned'; return how many there were."""
        with self._write() as conn:
            return conn.execute(
                "UPDATE rounds SET status = 'abandoned', finished_at = ? WHERE task_id = ? AND status = 'running'",
                (db.now(), task_id),
            ).rowcount

    def rounds(self, task_id: int) -> list[RoundRow]:
        """The task's rounds in the order they were started (a resumed run may start an index again)."""
        return self._all(RoundRow, "SELECT * FROM rounds WHERE task_id = ? ORDER BY id", (task_id,))

    def last_state(self, task_id: int) -> tuple[int, dict] | None:
        """(idx, state) of the latest ended round that left a state; rounds left running or abandoned are skipped."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT idx, state_json FROM rounds WHERE task_id = ? AND status IN ('done', 'failed') "
                "AND state_json IS NOT NULL ORDER BY id DESC LIMIT 1",
                (task_id,),
            ).fetchone()
        return None if row is None else (row["idx"], json.loads(row["state_json"]))

    # ---- candidates, reviews, profiles, decisions

    def add_candidate(
        self, task_id: int, round_id: int | None, label: str, source: str, *, origin: Origin,
        parent_id: int | None = None,
    ) -> CandidateRow:
        """Record a kernel source and write it to kernels/<task>/<label>.py under the run folder.

        The row and the file go together: the file is written (atomically) inside the transaction that inserts the
        row, so a label already taken fails before any file is touched. When two names sanitize to the same file
        name (or a folder holds several runs), the later file gets a numbered suffix; `path` says which it is.
        """
        db.check("candidate origin", origin, Origin)
        with self._write() as conn:
            task = conn.execute("SELECT name FROM tasks WHERE id = ?", (task_id,)).fetchone()
            if task is None:
                raise LookupError(f"no task with id {task_id} in {self.db_path}")
            folder = f"{KERNELS_DIR}/{safe_name(task['name'])}"
            stem = safe_name(label)
            path, n = f"{folder}/{stem}.py", 1
            while conn.execute("SELECT 1 FROM candidates WHERE path = ?", (path,)).fetchone():
                n += 1
                path = f"{folder}/{stem}-{n}.py"
            candidate_id = conn.execute(
                "INSERT INTO candidates (task_id, round_id, label, path, sha256, source, parent_id, origin, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (task_id, round_id, label, path, db.sha256(source), source, parent_id, origin, db.now()),
            ).lastrowid
            write_atomically(self.run_dir / path, source)
            inserted = conn.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
            return db.to_model(CandidateRow, inserted)

    def candidate(self, candidate_id: int) -> CandidateRow:
        return self._get("candidates", candidate_id, CandidateRow)

    def candidates(self, task_id: int) -> list[CandidateRow]:
        return self._all(CandidateRow, "SELECT * FROM candidates WHERE task_id = ? ORDER BY id", (task_id,))

    def add_review(self, candidate_id: int, result: dict, *, purpose: ReviewPurpose = "verdict") -> int:
        """Record a review: `result` is `ReviewResult.model_dump(mode="json")`. Its headline fields get their own
        columns (a missing key is NULL); the whole dict is kept as well. A 'baseline' review (the kernel timed again
        against torch.compile) counts in stage_totals but is not the kernel's verdict: review_of passes over it."""
        db.check("review purpose", purpose, ReviewPurpose)
        missing = [key for key in ("correct", "compiled") if key not in result]
        if missing:
            raise ValueError(f"a review result needs {' and '.join(missing)}: got keys {sorted(result)}")
        with self._write() as conn:
            return conn.execute(
                f"INSERT INTO reviews (candidate_id, correct, compiled, {', '.join(_REVIEW_COLUMNS)}, flags_json, "
                f"stage_seconds_json, result_json, created_at, purpose) "
                f"VALUES ({', '.join('?' * (len(_REVIEW_COLUMNS) + 8))})",
                (candidate_id, bool(result["correct"]), bool(result["compiled"]),
                 *(result.get(key) for key in _REVIEW_COLUMNS),
                 db.dumps(result.get("flags") or []), db.dumps(result.get("stage_seconds") or {}), db.dumps(result),
                 db.now(), purpose),
            ).lastrowid

    def review_of(self, candidate_id: int) -> ReviewRow | None:
        """The candidate's latest review that judged it (a baseline review does not)."""
        return self._first(ReviewRow, "SELECT * FROM reviews WHERE candidate_id = ? AND purpose = 'verdict' "
                           "ORDER BY id DESC LIMIT 1", (candidate_id,))

    def add_profile(self, candidate_id: int, evidence: dict, seconds: float | None = None,
                    queue_seconds: float | None = None) -> int:
        """Record a profile: `evidence` is `Evidence.model_dump(mode="json")`; `seconds` its run, `queue_seconds`
        its wait for a device."""
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO profiles (candidate_id, evidence_json, created_at, seconds, queue_seconds) "
                "VALUES (?, ?, ?, ?, ?)",
                (candidate_id, db.dumps(evidence), db.now(), seconds, queue_seconds),
            ).lastrowid

    def profile_of(self, candidate_id: int) -> ProfileRow | None:
        """The candidate's latest profile."""
        return self._first(ProfileRow, "SELECT * FROM profiles WHERE candidate_id = ? ORDER BY id DESC LIMIT 1",
                           (candidate_id,))

    def add_decision(self, round_id: int | None, candidate_id: int | None, decision: dict) -> int:
        """Record a decision: `decision` is `Decision.model_dump(mode="json")`. It must belong to a round or a
        candidate: that is how `decisions(task_id)` finds it."""
        if round_id is None and candidate_id is None:
            raise ValueError("a decision needs a round_id or a candidate_id: otherwise no task can find it")
        if "bottleneck" not in decision:
            raise ValueError(f"a decision needs a bottleneck: got keys {sorted(decision)}")
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO decisions (round_id, candidate_id, bottleneck, case_id, allowed_json, decision_json, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (round_id, candidate_id, decision["bottleneck"], decision.get("case"),
                 db.dumps(decision.get("allowed_methods") or []), db.dumps(decision), db.now()),
            ).lastrowid

    def decisions(self, task_id: int) -> list[DecisionRow]:
        """The task's decisions in the order they were made (found through their round or their candidate)."""
        return self._all(
            DecisionRow,
            "SELECT d.* FROM decisions d LEFT JOIN rounds r ON r.id = d.round_id "
            "LEFT JOIN candidates c ON c.id = d.candidate_id WHERE r.task_id = ? OR c.task_id = ? ORDER BY d.id",
            (task_id, task_id),
        )

    # ---- LLM calls

    def add_llm_call(
        self, *, run_id: int, task_id: int | None, round_idx: int | None, slot: int, agent: str, attempt: int,
        messages: list[dict], reply: str | None, error: str | None, input_tokens: int, output_tokens: int,
        tokens_estimated: bool, cost_usd: float | None, latency_s: float, attempts: int, model: str,
        round_id: int | None = None,
    ) -> int:
        """Record one LLM call: the messages sent and the reply (or the error), never anything else of the client.
        `round_id` links the call to its round row, which tells an abandoned attempt's calls from the redone ones."""
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO llm_calls (run_id, task_id, round_id, round_idx, slot, agent, attempt, messages_json, "
                "reply, error, input_tokens, output_tokens, tokens_estimated, cost_usd, latency_s, attempts, model, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, task_id, round_id, round_idx, slot, agent, attempt,
                 db.dumps([db.message(m) for m in messages]), reply, error, input_tokens, output_tokens,
                 bool(tokens_estimated), cost_usd, latency_s, attempts, model, db.now()),
            ).lastrowid

    def llm_calls(self, *, run_id: int | None = None, task_id: int | None = None) -> list[LLMCallRow]:
        """Calls in the order they were recorded, of one run and/or one task (all calls when neither is given)."""
        where, params = [], []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        if task_id is not None:
            where.append("task_id = ?")
            params.append(task_id)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        return self._all(LLMCallRow, f"SELECT * FROM llm_calls{clause} ORDER BY id", tuple(params))

    def llm_totals(self, task_id: int) -> dict[str, Any]:
        """What the task's LLM calls consumed. cost_usd sums the priced calls only: with unpriced_calls > 0 it is a
        lower bound. estimated_calls counts calls whose tokens were estimated from text length, not reported."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT COUNT(*) AS calls, COALESCE(SUM(input_tokens), 0) AS input_tokens, "
                "COALESCE(SUM(output_tokens), 0) AS output_tokens, COALESCE(SUM(cost_usd), 0.0) AS cost_usd, "
                "COALESCE(SUM(cost_usd IS NULL), 0) AS unpriced_calls, "
                "COALESCE(SUM(error IS NOT NULL), 0) AS failed_calls, "
                "COALESCE(SUM(tokens_estimated), 0) AS estimated_calls FROM llm_calls WHERE task_id = ?",
                (task_id,),
            ).fetchone()
        return {
            "calls": row["calls"],
            "tokens": row["input_tokens"] + row["output_tokens"],
            "input_tokens": row["input_tokens"],
            "output_tokens": row["output_tokens"],
            "cost_usd": float(row["cost_usd"]),
            "unpriced_calls": row["unpriced_calls"],
            "failed_calls": row["failed_calls"],
            "estimated_calls": row["estimated_calls"],
        }

    def stage_totals(self, task_id: int) -> dict[str, float]:
        """Where the task's evaluation seconds went: the reviews' stages summed (queue, prebuild, start, load,
        compile, verify, time, and their wall clock as review_wall), baseline reviews included, plus the profiles'
        seconds as profile and their waits for a device as queue. The one place a task's seconds are added up."""
        totals: dict[str, float] = {}
        with self._read() as conn:
            reviews = conn.execute(
                "SELECT r.stage_seconds_json FROM reviews r JOIN candidates c ON c.id = r.candidate_id "
                "WHERE c.task_id = ?", (task_id,)).fetchall()
            profiles = conn.execute(
                "SELECT p.seconds, p.queue_seconds FROM profiles p JOIN candidates c ON c.id = p.candidate_id "
                "WHERE c.task_id = ?", (task_id,)).fetchall()
        for (text,) in reviews:
            _add_stage_seconds(totals, json.loads(text or "{}"))
        for seconds, queued in profiles:
            _add_stage_seconds(totals, {k: v for k, v in (("profile", seconds), ("queue", queued)) if v is not None})
        return {k: round(v, 3) for k, v in sorted(totals.items())}

    def success_by_rules(self, task_id: int) -> tuple[bool | None, bool | None]:
        """Whether any kernel of the task was correct under strict and under kernelbench rules, from each kernel's
        verdict review; (None, None) when no review recorded its policy verdicts."""
        policies = [r.result.get("policy") for c in self.candidates(task_id)
                    if (r := self.review_of(c.id)) is not None]
        policies = [p for p in policies if p]
        if not policies:
            return None, None
        return any(p["correct_strict"] for p in policies), any(p["correct_kernelbench"] for p in policies)

    def export_transcript(self, task_id: int, path: Path) -> int:
        """Write the task's answered calls as a replay transcript (JSON Lines, read by `replay:PATH`); return how
        many entries. Ordered by (round, slot, id), so each seed's calls stay together. Failed calls are skipped, and
        so are the calls of abandoned rounds: a resumed run asked them again, and a replay must not serve both."""
        task = self.task(task_id)
        with self._read() as conn:
            rows = conn.execute(
                "SELECT c.* FROM llm_calls c LEFT JOIN rounds r ON r.id = c.round_id WHERE c.task_id = ? "
                "AND c.reply IS NOT NULL AND (r.status IS NULL OR r.status != 'abandoned') "
                "ORDER BY c.round_idx, c.slot, c.id",
                (task_id,),
            ).fetchall()
        lines = []
        for i, row in enumerate(rows):
            entry: dict[str, Any] = {}
            if i == 0:
                entry["note"] = f"recorded by kernelskill from run {self.run_dir}, task {task.name}"
            entry.update(
                agent=row["agent"], round=row["round_idx"], slot=row["slot"], attempt=row["attempt"],
                reply=row["reply"],
                usage={"input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"],
                       "estimated": bool(row["tokens_estimated"])},
                messages=json.loads(row["messages_json"]),
            )
            lines.append(json.dumps(entry, ensure_ascii=False) + "\n")
        write_atomically(Path(path), "".join(lines))
        return len(lines)

    # ---- plumbing

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            yield self._conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction, committed on leaving the block. IMMEDIATE takes the write lock up front, so a
        read-then-write cannot fail half-way because another process wrote in between."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                if self._conn.in_transaction:  # SQLite may already have rolled back (disk full, I/O error)
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _update(self, table: str, row_id: int, sql: str, params: tuple) -> None:
        with self._write() as conn:
            if conn.execute(sql, params).rowcount == 0:
                raise LookupError(f"no {table[:-1]} with id {row_id} in {self.db_path}")

    def _get(self, table: str, row_id: int, model: type[RowT]) -> RowT:
        found = self._first(model, f"SELECT * FROM {table} WHERE id = ?", (row_id,))
        if found is None:
            raise LookupError(f"no {table[:-1]} with id {row_id} in {self.db_path}")
        return found

    def _first(self, model: type[RowT], sql: str, params: tuple) -> RowT | None:
        with self._read() as conn:
            row = conn.execute(sql, params).fetchone()
        return None if row is None else db.to_model(model, row)

    def _all(self, model: type[RowT], sql: str, params: tuple) -> list[RowT]:
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [db.to_model(model, row) for row in rows]


def _add_stage_seconds(totals: dict[str, float], seconds: dict[str, float] | None) -> None:
    """Add one evaluation's stage seconds into `totals`; a review's wall clock counts as `review_wall`."""
    for stage, value in (seconds or {}).items():
        key = "review_wall" if stage == "wall" else stage
        totals[key] = totals.get(key, 0.0) + float(value)
