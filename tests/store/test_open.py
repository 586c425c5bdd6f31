"""Creating and opening run stores: the errors a user sees, and the schema migrations."""

from __future__ import annotations

import sqlite3

import pytest

from kernelskill.errors import KernelSkillError
from kernelskill.store import RunStore, schema

TABLES = {"runs", "tasks", "rounds", "candidates", "reviews", "profiles", "decisions", "llm_calls"}


def user_version(db_path) -> int:
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def tables(db_path) -> set[str]:
    conn = sqlite3.connect(db_path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def test_create_makes_the_folder_and_a_wal_database(tmp_path):
    run_dir = tmp_path / "a" / "b"
    with RunStore.create(run_dir) as store:
        assert store.db_path == run_dir / "run.db"
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    assert (run_dir / "run.db").is_file()


def test_create_refuses_a_folder_that_holds_a_run(tmp_path):
    RunStore.create(tmp_path).close()
    with pytest.raises(KernelSkillError, match="already holds a run") as info:
        RunStore.create(tmp_path)
    assert "--resume" in str(info.value) and "--out" in str(info.value)


def test_create_reports_a_folder_it_cannot_make(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(KernelSkillError, match="cannot create the run folder"):
        RunStore.create(tmp_path / "file" / "run")


def test_open_without_a_store_names_the_path(tmp_path):
    with pytest.raises(KernelSkillError) as info:
        RunStore.open(tmp_path / "nothing")
    message = str(info.value)
    assert f"no run store at {tmp_path / 'nothing' / 'run.db'}" in message
    assert "nothing to resume" in message and "--out" in message
    assert not (tmp_path / "nothing").exists()  # opening never creates anything


def test_open_sees_what_was_written(tmp_path):
    with RunStore.create(tmp_path) as store:
        run_id = store.add_run("bench", "fake:", {"k": 1})
    with RunStore.open(tmp_path) as store:
        assert store.latest_run().id == run_id


@pytest.mark.parametrize("content", [b"definitely not sqlite " * 200, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_a_file_that_is_not_a_run_store_is_named(tmp_path, content):
    (tmp_path / "run.db").write_bytes(content)
    with pytest.raises(KernelSkillError) as info:
        RunStore.open(tmp_path)
    message = str(info.value)
    assert str(tmp_path / "run.db") in message
    assert "not a kernelskill run store" in message and "move it away" in message


def test_another_programs_sqlite_database_is_refused(tmp_path):
    conn = sqlite3.connect(tmp_path / "run.db")
    conn.execute("CREATE TABLE runs (x)")
    conn.commit()
    conn.close()
    with pytest.raises(KernelSkillError, match="not a kernelskill run store"):
        RunStore.open(tmp_path)
    assert tables(tmp_path / "run.db") == {"runs"}  # left as it was


def test_migrations_build_an_empty_database(tmp_path):
    RunStore.create(tmp_path).close()
    assert user_version(tmp_path / "run.db") == len(schema.MIGRATIONS)
    assert tables(tmp_path / "run.db") == TABLES


EXTRA = "CREATE TABLE extra (id INTEGER PRIMARY KEY, note TEXT DEFAULT 'a;b'); CREATE INDEX extra_note ON extra (note);"


def test_an_older_database_gets_only_the_scripts_it_misses(tmp_path, monkeypatch):
    first = schema.MIGRATIONS[0]
    monkeypatch.setattr(schema, "MIGRATIONS", [first])
    with RunStore.create(tmp_path) as store:
        run_id = store.add_run("optimize", "fake:", {})
    assert user_version(tmp_path / "run.db") == 1

    # replaying script 1 would fail ("table runs already exists"): opening works only if it is skipped
    monkeypatch.setattr(schema, "MIGRATIONS", [first, EXTRA])
    with RunStore.open(tmp_path) as store:
        assert store.run(run_id).kind == "optimize"
        store._conn.execute("INSERT INTO extra (id) VALUES (1)")
    assert user_version(tmp_path / "run.db") == 2
    assert tables(tmp_path / "run.db") == TABLES | {"extra"}
    RunStore.open(tmp_path).close()  # already current: nothing to do


def test_a_failing_migration_changes_nothing(tmp_path, monkeypatch):
    first = schema.MIGRATIONS[0]
    monkeypatch.setattr(schema, "MIGRATIONS", [first])
    RunStore.create(tmp_path).close()
    monkeypatch.setattr(schema, "MIGRATIONS", [first, EXTRA + " CREATE TABLE runs (x);"])
    with pytest.raises(KernelSkillError, match="table runs already exists"):
        RunStore.open(tmp_path)
    assert user_version(tmp_path / "run.db") == 1
    assert tables(tmp_path / "run.db") == TABLES  # the half-applied script was rolled back


def test_a_newer_database_is_refused(tmp_path):
    RunStore.create(tmp_path).close()
    newer = len(schema.MIGRATIONS) + 1
    conn = sqlite3.connect(tmp_path / "run.db")
    conn.execute(f"PRAGMA user_version = {newer}")
    conn.close()
    with pytest.raises(KernelSkillError) as info:
        RunStore.open(tmp_path)
    assert str(info.value) == (
        f"the run store {tmp_path / 'run.db'} was written by a newer kernelskill (schema {newer}, this one knows "
        f"{len(schema.MIGRATIONS)}): upgrade kernelskill"
    )


def damaged_store(tmp_path, page: int = 5):
    """A run store with enough rows for many pages, then one page's header overwritten (a disk error): the file
    still opens as SQLite, and only a query that reads that page would notice."""
    with RunStore.create(tmp_path) as store:
        run_id = store.add_run("optimize", "fake:", {})
        task_id = store.add_task(run_id, "t", "t.py", "source")
        for _ in range(200):
            store.add_llm_call(run_id=run_id, task_id=task_id, round_idx=1, slot=0, agent="planner", attempt=1,
                               messages=[{"role": "user", "content": "x" * 500}], reply="y" * 300, error=None,
                               input_tokens=1, output_tokens=1, tokens_estimated=False, cost_usd=None, latency_s=0.0,
                               attempts=1, model="fake:")
    db = tmp_path / "run.db"
    data = bytearray(db.read_bytes())
    assert len(data) > 4096 * (page + 1)
    data[4096 * page:4096 * page + 64] = b"\xa5" * 64
    db.write_bytes(bytes(data))
    return tmp_path


def test_a_store_damaged_inside_a_page_is_refused_at_open(tmp_path):
    with pytest.raises(KernelSkillError) as info:
        RunStore.open(damaged_store(tmp_path))
    message = str(info.value)
    assert f"the run store {tmp_path / 'run.db'} is damaged" in message and "another --out" in message
    assert "\n" not in message


@pytest.mark.slow
def test_resuming_a_damaged_store_exits_2_with_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    run_dir = damaged_store(tmp_path / "run")
    proc = subprocess.run(
        [sys.executable, "-m", "kernelskill.cli", "optimize", str(examples / "gelu_chain.py"), "--model",
         f"replay:{examples / 'gelu_chain.transcript.jsonl'}", "--device", "cpu", "--out", str(run_dir), "--resume"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is damaged" in lines[0], proc.stderr
