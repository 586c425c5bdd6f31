"""The run store's connection and row plumbing: the run folder, opening run.db (WAL, foreign keys, a busy timeout,
an intact and up-to-date schema), rows as their models, and the small encoders every table uses."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel

from kernelskill.errors import KernelSkillError
from kernelskill.store import schema

BUSY_TIMEOUT_S = 10.0  # how long a writer waits for another process's transaction before giving up

RowT = TypeVar("RowT", bound=BaseModel)


def make_run_folder(run_dir: Path) -> Path:
    """The run folder, made when missing; one that cannot be made is the user's to fix (another --out)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KernelSkillError(f"cannot create the run folder {run_dir}: {exc.strerror or exc}") from None
    return run_dir


def connect(db_path: Path, *, create: bool) -> sqlite3.Connection:
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


def connect_read_only(db_path: Path) -> sqlite3.Connection:
    """Open the database for reading only (the report): no migration, no journal change, and in a folder this
    process cannot write (a read-only mount, another user's run) as an immutable file, since SQLite would otherwise
    need to create its WAL index beside it."""
    import os

    immutable = "&immutable=1" if not os.access(db_path.parent, os.W_OK) else ""
    uri = f"file:{urllib.parse.quote(str(db_path.resolve()))}?mode=ro{immutable}"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_S)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise _open_error(db_path, exc) from None
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


def to_model(model: type[RowT], record: sqlite3.Row) -> RowT:
    """A row as its model: each `*_json` column decoded and named without the suffix."""
    values = {}
    for key, value in zip(record.keys(), record):
        if key.endswith("_json"):
            key, value = key.removesuffix("_json"), None if value is None else json.loads(value)
        values[key] = value
    return model.model_validate(values)


def check(what: str, value: str, allowed_type: Any) -> None:
    allowed = get_args(allowed_type)
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, allowed))}, not {value!r}")


def message(value: Any) -> dict:
    """A chat message as a plain dict (callers may hand over `Message` models)."""
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else dict(value)


def safe_name(name: str) -> str:
    """A file name made of [A-Za-z0-9._-] that cannot climb out of its folder ('.', '..') or hide (a leading dot)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:100]
    return "_" + safe if not safe or safe.startswith(".") else safe


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def dumps_opt(value: Any) -> str | None:
    return None if value is None else dumps(value)
