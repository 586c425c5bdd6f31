"""The run store: one SQLite database per run folder that records everything `optimize` and `bench` do.

A run folder DIR holds DIR/run.db and DIR/kernels/<task>/<label>.py (every kernel source ever reviewed, also kept in
the database). Every write commits at once, so a crash or a kill loses nothing already written and a run can be
resumed from its last finished round. One connection serves all threads (seeds are generated concurrently) behind a
lock; WAL mode and a busy timeout let several processes share the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel

from kernelskill import __version__
from kernelskill.errors import KernelSkillError
from kernelskill.store import schema
from kernelskill.store.rows import (
    Branch,
    CandidateRow,
    DecisionRow,
    LLMCallRow,
    Origin,
    ProfileRow,
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
BUSY_TIMEOUT_S = 10.0  # how long a writer waits for another process's transaction before giving up

_ENDED_RUN = ("finished", "interrupted", "failed")
_ENDED_TASK = ("finished", "failed")
# ReviewResult fields copied into their own columns, so a run can be queried without parsing result_json
_REVIEW_COLUMNS = ("stage", "error_kind", "error", "speedup", "ref_ms", "candidate_ms", "compile_ms",
                   "speedup_vs_compile")

RowT = TypeVar("RowT", bound=BaseModel)


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
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KernelSkillError(f"cannot create the run folder {run_dir}: {exc.strerror or exc}") from None
        return cls(run_dir, _connect(db_path, create=True))

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        """Open the store of an existing run folder, upgrading its schema if it was written by an older version."""
        run_dir = Path(run_dir)
        db_path = run_dir / DB_NAME
        if not db_path.is_file():
            raise KernelSkillError(
                f"no run store at {db_path}: nothing to resume; start a run with --out {run_dir}"
            )
        return cls(run_dir, _connect(db_path, create=False))

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
        _check("run kind", kind, RunKind)
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO runs (kind, created_at, status, model, config_json, kernelskill_version) "
                "VALUES (?, ?, 'running', ?, ?, ?)",
                (kind, _now(), model, _dumps(config), __version__),
            ).lastrowid

    def run(self, run_id: int) -> RunRow:
        return self._get("runs", run_id, RunRow)

    def latest_run(self) -> RunRow | None:
        return self._first(RunRow, "SELECT * FROM runs ORDER BY id DESC LIMIT 1", ())

    def set_run_status(self, run_id: int, status: RunStatus) -> None:
        """Set the status; an ended status stamps finished_at, 'running' (a resumed run) clears it."""
        _check("run status", status, RunStatus)
        finished_at = _now() if status in _ENDED_RUN else None
        self._update("runs", run_id, "UPDATE runs SET status = ?, finished_at = ? WHERE id = ?",
                     (status, finished_at, run_id))

    # ---- tasks

    def add_task(self, run_id: int, name: str, problem_path: str, problem_source: str) -> int:
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO tasks (run_id, name, problem_path, problem_sha256, problem_source, status) "
                "VALUES (?, ?, ?, ?, ?, 'pending')",
                (run_id, name, problem_path, _sha256(problem_source), problem_source),
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
        _check("task status", status, TaskStatus)
        now = _now()
        self._update(
            "tasks", task_id,
            "UPDATE tasks SET status = ?, reason = ?, summary_json = COALESCE(?, summary_json), "
            "started_at = CASE WHEN ? = 'running' THEN COALESCE(started_at, ?) ELSE started_at END, "
            "finished_at = ? WHERE id = ?",
            (status, reason, None if summary is None else _dumps(summary), status, now,
             now if status in _ENDED_TASK else None, task_id),
        )

    def set_task_kernels(self, task_id: int, *, best: int | None, base: int | None) -> None:
        """Record the task's best candidate and the one the next round builds on (None clears either)."""
        self._update("tasks", task_id,
                     "UPDATE tasks SET best_candidate_id = ?, base_candidate_id = ? WHERE id = ?",
                     (best, base, task_id))

    # ---- rounds

    def start_round(self, task_id: int, idx: int, branch: Branch) -> int:
        _check("round branch", branch, Branch)
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO rounds (task_id, idx, branch, status, started_at) VALUES (?, ?, ?, 'running', ?)",
                (task_id, idx, branch, _now()),
            ).lastrowid

    def finish_round(
        self, round_id: int, status: RoundStatus, *, method: str | None = None, note: str | None = None,
        outcome: dict | None = None, state: dict | None = None,
    ) -> None:
        """Close a round. `state` is the loop's snapshot after it: what `last_state` hands a resumed run."""
        if status == "running":
            raise ValueError("finish_round needs an ended status ('done', 'failed' or 'abandoned'), not 'running'")
        _check("round status", status, RoundStatus)
        self._update(
            "rounds", round_id,
            "UPDATE rounds SET status = ?, method = ?, note = ?, outcome_json = ?, state_json = ?, finished_at = ? "
            "WHERE id = ?",
            (status, method, note, _dumps_opt(outcome), _dumps_opt(state), _now(), round_id),
        )

    def abandon_unfinished_rounds(self, task_id: int) -> int:
        """Mark the rounds a crash or a kill left 'running' as 'abandoned'; return how many there were."""
        with self._write() as conn:
            return conn.execute(
                "UPDATE rounds SET status = 'abandoned', finished_at = ? WHERE task_id = ? AND status = 'running'",
                (_now(), task_id),
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
        _check("candidate origin", origin, Origin)
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
                (task_id, round_id, label, path, _sha256(source), source, parent_id, origin, _now()),
            ).lastrowid
            _write_atomically(self.run_dir / path, source.encode("utf-8"))
            return _row(CandidateRow, conn.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)).fetchone())

    def candidate(self, candidate_id: int) -> CandidateRow:
        return self._get("candidates", candidate_id, CandidateRow)

    def candidates(self, task_id: int) -> list[CandidateRow]:
        return self._all(CandidateRow, "SELECT * FROM candidates WHERE task_id = ? ORDER BY id", (task_id,))

    def add_review(self, candidate_id: int, result: dict) -> int:
        """Record a review: `result` is `ReviewResult.model_dump(mode="json")`. Its headline fields get their own
        columns (a missing key is NULL); the whole dict is kept as well."""
        missing = [key for key in ("correct", "compiled") if key not in result]
        if missing:
            raise ValueError(f"a review result needs {' and '.join(missing)}: got keys {sorted(result)}")
        with self._write() as conn:
            return conn.execute(
                f"INSERT INTO reviews (candidate_id, correct, compiled, {', '.join(_REVIEW_COLUMNS)}, flags_json, "
                f"stage_seconds_json, result_json, created_at) VALUES ({', '.join('?' * (len(_REVIEW_COLUMNS) + 7))})",
                (candidate_id, bool(result["correct"]), bool(result["compiled"]),
                 *(result.get(key) for key in _REVIEW_COLUMNS),
                 _dumps(result.get("flags") or []), _dumps(result.get("stage_seconds") or {}), _dumps(result),
                 _now()),
            ).lastrowid

    def review_of(self, candidate_id: int) -> ReviewRow | None:
        """The candidate's latest review."""
        return self._first(ReviewRow, "SELECT * FROM reviews WHERE candidate_id = ? ORDER BY id DESC LIMIT 1",
                           (candidate_id,))

    def add_profile(self, candidate_id: int, evidence: dict, seconds: float | None = None) -> int:
        with self._write() as conn:
            return conn.execute(
                "INSERT INTO profiles (candidate_id, evidence_json, created_at, seconds) VALUES (?, ?, ?, ?)",
                (candidate_id, _dumps(evidence), _now(), seconds),
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
                 _dumps(decision.get("allowed_methods") or []), _dumps(decision), _now()),
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
                (run_id, task_id, round_id, round_idx, slot, agent, attempt, _dumps([_message(m) for m in messages]),
                 reply, error, input_tokens, output_tokens, bool(tokens_estimated), cost_usd, latency_s, attempts,
                 model, _now()),
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
        compile, verify, time, and their wall clock as review_wall) plus the profiles' seconds as profile."""
        totals: dict[str, float] = {}
        with self._read() as conn:
            reviews = conn.execute(
                "SELECT r.stage_seconds_json FROM reviews r JOIN candidates c ON c.id = r.candidate_id "
                "WHERE c.task_id = ?", (task_id,)).fetchall()
            profile_s = conn.execute(
                "SELECT COALESCE(SUM(p.seconds), 0), COUNT(p.seconds) FROM profiles p "
                "JOIN candidates c ON c.id = p.candidate_id WHERE c.task_id = ?", (task_id,)).fetchone()
        for (text,) in reviews:
            add_stage_seconds(totals, json.loads(text or "{}"))
        if profile_s[1]:
            totals["profile"] = float(profile_s[0])
        return {k: round(v, 3) for k, v in sorted(totals.items())}

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
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(path, "".join(lines).encode("utf-8"))
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
        return None if row is None else _row(model, row)

    def _all(self, model: type[RowT], sql: str, params: tuple) -> list[RowT]:
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return [_row(model, row) for row in rows]


def add_stage_seconds(totals: dict[str, float], seconds: dict[str, float] | None) -> None:
    """Add one review's stage seconds into `totals`; its wall clock counts as `review_wall`."""
    for stage, value in (seconds or {}).items():
        key = "review_wall" if stage == "wall" else stage
        totals[key] = totals.get(key, 0.0) + float(value)


def _connect(db_path: Path, *, create: bool) -> sqlite3.Connection:
    """Open the database, set it up (WAL, foreign keys, busy timeout) and bring its schema up to date."""
    uri = f"file:{urllib.parse.quote(str(db_path.resolve()))}?mode={'rwc' if create else 'rw'}"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise _open_error(db_path, exc) from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        journal = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if journal.lower() != "wal":
            raise KernelSkillError(
                f"the run store {db_path} cannot use SQLite's WAL journal (it stayed in {journal!r} mode), which "
                "crash safety and concurrent writers need: put the run folder on a local disk"
            )
        conn.execute("PRAGMA synchronous = NORMAL")  # with WAL: a crash never corrupts, a power cut may lose the last
        if not create:
            _check_intact(conn, db_path)
        schema.apply_migrations(conn, db_path)
    except sqlite3.Error as exc:
        conn.close()
        raise _open_error(db_path, exc) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _check_intact(conn: sqlite3.Connection, db_path: Path) -> None:
    """Refuse a store damaged inside a page (a disk error, a copy cut short): its header opens fine, and the damage
    would surface later as "database disk image is malformed" from whichever query reads that page, mid-run.
    quick_check reads every page once (milliseconds for a run store of a few MB)."""
    found = [row[0] for row in conn.execute("PRAGMA quick_check(3)").fetchall()]
    if found != ["ok"]:
        lines = [" ".join(line.split()) for text in found for line in text.splitlines() if not line.startswith("***")]
        raise KernelSkillError(
            f"the run store {db_path} is damaged ({'; '.join(lines)[:300]}): move the run folder away and start a "
            "new run with another --out (its kernels/ and summary files stay readable)"
        )


def _open_error(db_path: Path, exc: sqlite3.Error) -> KernelSkillError:
    name = getattr(exc, "sqlite_errorname", "")
    if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or "not a database" in str(exc) or "malformed" in str(exc):
        return KernelSkillError(
            f"{db_path} is not a kernelskill run store, or it is damaged ({exc}): move it away, or choose another "
            "--out for a new run"
        )
    return KernelSkillError(f"cannot open the run store {db_path}: {exc}")


def _row(model: type[RowT], row: sqlite3.Row) -> RowT:
    """A row as its model: each `*_json` column decoded and named without the suffix."""
    values = {}
    for key, value in zip(row.keys(), row):
        if key.endswith("_json"):
            key, value = key.removesuffix("_json"), None if value is None else json.loads(value)
        values[key] = value
    return model.model_validate(values)


def _check(what: str, value: str, allowed_type: Any) -> None:
    allowed = get_args(allowed_type)
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, allowed))}, not {value!r}")


def _message(message: Any) -> dict:
    """A chat message as a plain dict (callers may hand over `Message` models)."""
    return message.model_dump(mode="json") if isinstance(message, BaseModel) else dict(message)


def safe_name(name: str) -> str:
    """A file name made of [A-Za-z0-9._-] that cannot climb out of its folder ('.', '..') or hide (a leading dot)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:100]
    return "_" + safe if not safe or safe.startswith(".") else safe


def _write_atomically(target: Path, data: bytes) -> None:
    """Write a temporary file next to `target`, then rename it over: a reader never sees half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _dumps_opt(value: Any) -> str | None:
    return None if value is None else _dumps(value)
