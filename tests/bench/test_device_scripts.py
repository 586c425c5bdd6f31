"""scripts/device/*.sh, the GPU session's calls: each parses, and every script and folder it names exists here."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((REPO / "scripts" / "device").glob("*.sh"))
spec = importlib.util.spec_from_file_location("corpus_bench", REPO / "scripts" / "corpus_bench.py")
corpus_bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(corpus_bench)


def test_there_are_device_scripts():
    assert {p.name for p in SCRIPTS} >= {"setup.sh", "capture.sh", "method_check.sh", "recheck.sh", "spread.sh"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_device_script_parses_and_names_what_exists(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    for name in re.findall(r"scripts/([a-z_]+\.py)", text):
        assert (REPO / "scripts" / name).is_file(), name
    if script.name != "setup.sh":
        assert 'source "$(dirname "$0")/setup.sh"' in text  # the wheels and PYTHONPATH, before anything runs
    for path in re.findall(r"(docs/h200/[a-z0-9_/.]+[a-z0-9_]|tests/data/[a-z0-9_/.]+[a-z0-9_])", text):
        assert (REPO / path).exists(), path


def test_a_run_folder_packed_while_the_store_is_open_resumes_elsewhere(tmp_path):
    """scripts/corpus_bench.py packs the run folder every minute while the bench writes, so a GPU call cut short
    still brings its finished tasks back: the pack holds SQLite's own copy of the store (not its live write-ahead
    log) and appears whole or not at all."""
    import tarfile

    from kernelskill.store import RunStore


    run = tmp_path / "run"
    store = RunStore.create(run)
    run_id = store.add_run("bench", "corpus:test", {"command": "test"})
    store.add_task(run_id, "1_task", "1_task.py", "source")
    assert (run / "run.db-wal").exists()  # the task sits in the write-ahead log, the store still open
    tar = tmp_path / "out" / "run.tar.gz"
    corpus_bench.pack(run, tar, quiet=True)
    assert not tar.with_name(tar.name + ".part").exists()
    with tarfile.open(tar) as t:
        names = t.getnames()
        assert "run/run.db" in names and not [n for n in names if n.endswith(("-wal", "-shm"))]
        t.extractall(tmp_path / "elsewhere", filter="data")
    resumed = RunStore.open(tmp_path / "elsewhere" / "run")
    assert resumed.find_task(run_id, "1_task") is not None
    store.close()
    resumed.close()


def test_with_kernels_narrows_a_level_to_the_tasks_the_corpus_has_a_kernel_for(tmp_path):
    entries = [{"level": "1", "index": 1, "name": "1_a", "kernel": "k1.py"},
               {"level": "1", "index": 2, "name": "2_b", "kernel": None},
               {"level": "1", "index": 3, "name": "3_c", "kernel": "k3.py"},
               {"level": "2", "index": 1, "name": "1_d", "kernel": "k21.py"}]
    (tmp_path / "corpus.json").write_text(json.dumps({"format": 1, "source": "test", "entries": entries}))
    assert corpus_bench.with_kernels(tmp_path, ["--level", "1", "--baseline", "compile"]) == [
        "--level", "1", "--baseline", "compile", "--tasks", "1,3"]
    assert corpus_bench.with_kernels(tmp_path, ["--level", "1", "--tasks", "2,3"]) == ["--level", "1", "--tasks", "3"]
    with pytest.raises(SystemExit, match="exactly one level"):
        corpus_bench.with_kernels(tmp_path, ["--baseline", "compile"])


def test_a_chunk_says_what_the_compile_baseline_gave_and_what_the_warmed_cache_saved(tmp_path):
    import sqlite3

    (tmp_path / "results.json").write_text(json.dumps({"tasks": [{"speedup_vs_compile": 2.0},
                                                                 {"speedup_vs_compile": None}]}))
    db = sqlite3.connect(tmp_path / "run.db")
    db.execute("create table reviews (result_json text)")
    for warm in ({"seconds": 3.0, "fxgraph_cache_hit": 2, "fxgraph_cache_miss": 0},
                 {"seconds": 40.0, "fxgraph_cache_hit": 0, "fxgraph_cache_miss": 1}, None):
        db.execute("insert into reviews values (?)", (json.dumps({"timing": {"compile_warmup": warm}}),))
    db.commit()
    db.close()
    assert corpus_bench.compile_baseline(tmp_path) == {"tasks": 1, "median_vs_compile": 2.0,
                                                       "median_first_call_s": 21.5, "graphs_loaded": 2,
                                                       "graphs_compiled": 1}
    (tmp_path / "results.json").write_text(json.dumps({"tasks": [{"speedup_vs_compile": None}]}))
    db = sqlite3.connect(tmp_path / "run.db")
    db.execute("delete from reviews")
    db.commit()
    db.close()
    assert corpus_bench.compile_baseline(tmp_path) is None  # no baseline asked: nothing printed
