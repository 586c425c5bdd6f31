"""The run store's schema, as append-only migrations.

`MIGRATIONS[i]` brings a database from version i to version i + 1 (`PRAGMA user_version` holds the version). Never
edit or reorder a script that has shipped: run folders written by older versions are upgraded by replaying only the
scripts they miss. To change the schema, append a script.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from kernelskill.errors import KernelSkillError

MIGRATIONS: list[str] = [
    # 1: the first schema. Timestamps are ISO-8601 UTC text; *_json columns hold JSON text.
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,                  -- 'optimize' | 'bench'
        created_at TEXT NOT NULL,
        finished_at TEXT,
        status TEXT NOT NULL,                -- 'running' | 'finished' | 'interrupted' | 'failed'
        model TEXT NOT NULL,
        config_json TEXT NOT NULL,
        kernelskill_version TEXT NOT NULL
    );

    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        name TEXT NOT NULL,
        problem_path TEXT NOT NULL,
        problem_sha256 TEXT NOT NULL,
        problem_source TEXT NOT NULL,
        status TEXT NOT NULL,                -- 'pending' | 'running' | 'finished' | 'failed'
        reason TEXT,
        best_candidate_id INTEGER REFERENCES candidates(id),
        base_candidate_id INTEGER REFERENCES candidates(id),
        summary_json TEXT,
        started_at TEXT,
        finished_at TEXT,
        UNIQUE (run_id, name)
    );

    CREATE TABLE rounds (
        id INTEGER PRIMARY KEY,
        task_id INTEGER NOT NULL REFERENCES tasks(id),
        idx INTEGER NOT NULL,                -- 0: the seed phase; 1..N: the rounds
        branch TEXT NOT NULL,                -- 'seed' | 'repair' | 'optimize'
        status TEXT NOT NULL,                -- 'running' | 'done' | 'failed' | 'abandoned'
        method TEXT,
        note TEXT,
        outcome_json TEXT,
        state_json TEXT,                     -- the loop's state after the round, opaque to the store
        started_at TEXT NOT NULL,
        finished_at TEXT
    );
    CREATE INDEX rounds_task_idx ON rounds (task_id, idx);

    CREATE TABLE candidates (
        id INTEGER PRIMARY KEY,
        task_id INTEGER NOT NULL REFERENCES tasks(id),
        round_id INTEGER REFERENCES rounds(id),
        label TEXT NOT NULL,
        path TEXT NOT NULL UNIQUE,           -- relative to the run folder
        sha256 TEXT NOT NULL,
        source TEXT NOT NULL,
        parent_id INTEGER REFERENCES candidates(id),
        origin TEXT NOT NULL,                -- 'seed' | 'repair' | 'optimize'
        created_at TEXT NOT NULL,
        UNIQUE (task_id, label)
    );

    CREATE TABLE reviews (
        id INTEGER PRIMARY KEY,
        candidate_id INTEGER NOT NULL REFERENCES candidates(id),
        correct INTEGER NOT NULL,
        compiled INTEGER NOT NULL,
        stage TEXT,
        error_kind TEXT,
        error TEXT,
        speedup REAL,
        ref_ms REAL,
        candidate_ms REAL,
        compile_ms REAL,
        speedup_vs_compile REAL,
        flags_json TEXT NOT NULL,
        stage_seconds_json TEXT NOT NULL,
        result_json TEXT NOT NULL,           -- the whole ReviewResult
        created_at TEXT NOT NULL
    );
    CREATE INDEX reviews_candidate ON reviews (candidate_id);

    CREATE TABLE profiles (
        id INTEGER PRIMARY KEY,
        candidate_id INTEGER NOT NULL REFERENCES candidates(id),
        evidence_json TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX profiles_candidate ON profiles (candidate_id);

    CREATE TABLE decisions (
        id INTEGER PRIMARY KEY,
        round_id INTEGER REFERENCES rounds(id),
        candidate_id INTEGER REFERENCES candidates(id),
        bottleneck TEXT NOT NULL,
        case_id TEXT,
        allowed_json TEXT NOT NULL,
        decision_json TEXT NOT NULL,         -- the full trace
        created_at TEXT NOT NULL
    );
    CREATE INDEX decisions_round ON decisions (round_id);
    CREATE INDEX decisions_candidate ON decisions (candidate_id);

    CREATE TABLE llm_calls (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        task_id INTEGER REFERENCES tasks(id),
        round_id INTEGER REFERENCES rounds(id), -- tells a redone round's calls from the abandoned attempt's
        round_idx INTEGER,
        slot INTEGER NOT NULL DEFAULT 0,     -- the seed number for Generator calls, else 0
        agent TEXT NOT NULL,
        attempt INTEGER NOT NULL,            -- 1, or 2 for a re-ask
        messages_json TEXT NOT NULL,
        reply TEXT,
        error TEXT,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        tokens_estimated INTEGER NOT NULL,
        cost_usd REAL,
        latency_s REAL NOT NULL,
        attempts INTEGER NOT NULL,           -- HTTP requests sent, retries included
        model TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX llm_calls_run ON llm_calls (run_id);
    CREATE INDEX llm_calls_task ON llm_calls (task_id, round_idx, slot);
    """,
    # 2: how long each profile took, so a run's seconds can be told apart by stage (queue, compile, verify, time,
    # profile); the reviews' stage seconds are in reviews.stage_seconds_json.
    """
    ALTER TABLE profiles ADD COLUMN seconds REAL;
    """,
    # 3: every evaluation's seconds in the store, so a task's stage totals come from one place: how long a profile
    # waited for its device, and reviews that are not a kernel's verdict (the best kernel timed again against
    # torch.compile for `bench --baseline compile`), which review_of() passes over. purpose: 'verdict' | 'baseline'.
    """
    ALTER TABLE profiles ADD COLUMN queue_seconds REAL;
    ALTER TABLE reviews ADD COLUMN purpose TEXT NOT NULL DEFAULT 'verdict';
    """,
]


def schema_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def apply_migrations(conn: sqlite3.Connection, db_path: Path) -> int:
    """Bring the database to the latest version, in one transaction; return the version it is at.

    `conn` must be in autocommit mode (`isolation_level=None`) so that the transaction here is the only one. The
    version is read again once the write lock is held: another process may have migrated in the meantime.
    """
    known = len(MIGRATIONS)
    if _check_version(schema_version(conn), known, db_path) == known:
        return known
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _check_version(schema_version(conn), known, db_path)
        if version == 0 and conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
            raise KernelSkillError(
                f"{db_path} is an SQLite database but not a kernelskill run store (it has tables and no schema "
                "version): move it away, or choose another --out for a new run"
            )
        for script in MIGRATIONS[version:]:
            for statement in _statements(script):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {known}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return known


def _check_version(version: int, known: int, db_path: Path) -> int:
    if version > known:
        raise KernelSkillError(
            f"the run store {db_path} was written by a newer kernelskill (schema {version}, this one knows "
            f"{known}): upgrade kernelskill"
        )
    return version


def _statements(script: str) -> Iterator[str]:
    """Split a script into statements. `executescript` would commit the migration's transaction first."""
    buffer = ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):  # a ';' inside a string or a trigger body does not end it
            if buffer.strip(" \t\r\n;"):
                yield buffer
            buffer = ""
    if buffer.strip(" \t\r\n;"):
        yield buffer  # a trailing comment, or a broken statement that SQLite will reject with its own message
