"""The build cache's bookkeeping: what it holds, least-recently-used pruning, and what pruning must never touch."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelskill.review.cuda import build
from kernelskill.review.cuda import cache as build_cache  # `cache` is this module's fixture
from kernelskill.review.cuda.plan import plan_build

DAY = 86400.0


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELSKILL_SANDBOX_CACHE", str(tmp_path / "sandbox"))  # the headers' and candidates' too
    monkeypatch.delenv(build_cache.LIMIT_ENV, raising=False)
    return tmp_path / "cache"


def _age(path: Path, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


def ext(name: str) -> str:
    """An extension entry's folder name: 32 hex digits, as the builder names them."""
    return hashlib.md5(name.encode()).hexdigest()


def make_extension(name: str, size: int, used_ago: float) -> Path:
    entry = build_cache.build_dir() / ext(name)
    entry.mkdir(parents=True)
    (entry / "ks_mod.so").write_bytes(b"x" * size)
    (entry / "build.json").write_text("{}")
    _age(entry / "build.json", used_ago)
    return entry


def make_object(key: str, size: int, used_ago: float) -> Path:
    objects = build_cache.build_dir() / "obj"
    objects.mkdir(parents=True, exist_ok=True)
    (objects / f"{key}.o").write_bytes(b"o" * size)
    (objects / f"{key}.json").write_text("{}")
    _age(objects / f"{key}.json", used_ago)
    return objects / f"{key}.o"


def make_pch(name: str, size: int, used_ago: float) -> Path:
    entry = build_cache.headers_dir() / name
    entry.mkdir(parents=True)
    (entry / "ks_torch_extension.h.gch").write_bytes(b"p" * size)
    (entry / "pch.json").write_text("{}")
    _age(entry / "pch.json", used_ago)
    return entry


def names(report) -> list[str]:
    return [e["name"] for e in report.removed]


def test_entries_and_usage_by_kind(cache):
    make_extension("a", 1000, DAY)
    make_object("b" * 64, 500, DAY)
    make_pch("c", 2000, DAY)
    build_cache.check_dir().mkdir(parents=True)
    (build_cache.check_dir() / "d.json").write_text("{}")  # what versions before the builder-based check left
    u = build_cache.usage()
    by_kind = {k.kind: k for k in u.kinds}
    assert [by_kind[k].entries for k in ("extension", "object", "pch", "check", "unfinished")] == [1, 1, 1, 1, 0]
    assert by_kind["extension"].bytes == 1002 and by_kind["object"].bytes == 502 and by_kind["pch"].bytes == 2002
    assert u.total_bytes == 1002 + 502 + 2002 + 2
    assert u.limit_bytes == 20 * 1024**3 and u.root == str(cache)


def test_prune_removes_the_least_recently_used_until_the_cache_fits(cache):
    make_extension("old", 1000, 3 * DAY)
    make_pch("middle", 1000, 2 * DAY)
    make_object("n" * 64, 1000, 1 * DAY)
    report = build_cache.prune(max_bytes=1500)
    assert names(report) == [ext("old"), "middle"]
    assert report.bytes_after == 1002 and report.freed == 2004
    assert [e.name for e in build_cache.entries()] == ["n" * 64]
    assert not list(build_cache.build_dir().glob(".trash-*"))  # renamed out of the way, then deleted


def test_an_entry_locked_by_a_build_is_kept(cache):
    """The guard that keeps pruning from pulling a PCH or library out from under a running build."""
    make_extension("busy", 1000, 3 * DAY)
    make_extension("idle", 1000, 2 * DAY)
    busy = ext("busy")
    code = ("import sys, time; from pathlib import Path; from kernelskill.review.cuda.cache import flock\n"
            "with flock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(build_cache.locks_dir() / f"{busy}.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        report = build_cache.prune(max_bytes=0)
    finally:
        holder.kill()
        holder.wait()
    assert names(report) == [ext("idle")]
    assert [(e["name"], e["why"]) for e in report.kept_in_use] == [(busy, "locked by a build")]
    assert (build_cache.build_dir() / busy / "ks_mod.so").is_file()


def test_recently_used_entries_are_kept_even_by_prune_all(cache):
    make_pch("fresh", 1000, 60)
    make_object("o" * 64, 1000, 3 * DAY)
    report = build_cache.prune(max_bytes=0)
    assert names(report) == ["o" * 64]
    assert report.kept_in_use[0]["name"] == "fresh" and "used in the last" in report.kept_in_use[0]["why"]


def test_older_than_dry_run_and_leftovers(cache):
    make_extension("month", 10, 31 * DAY)
    make_extension("week", 10, 7 * DAY)
    stale = build_cache.build_dir() / ".tmp-abc-stale"
    stale.mkdir()
    _age(stale, 2 * DAY)
    running = build_cache.build_dir() / ".tmp-def-running"
    running.mkdir()
    trash = build_cache.build_dir() / ".trash-0123"
    (trash / "sub").mkdir(parents=True)
    dry = build_cache.prune(older_than_s=30 * DAY, dry_run=True)
    assert sorted(names(dry)) == sorted([".tmp-abc-stale", ".trash-0123", ext("month")])
    assert stale.exists() and trash.exists() and (build_cache.build_dir() / ext("month")).exists()
    real = build_cache.prune(older_than_s=30 * DAY)
    assert sorted(names(real)) == sorted(names(dry))
    left = {e.name for e in build_cache.entries()}
    assert left == {ext("week"), ".tmp-def-running"}


def test_cache_hits_mark_entries_as_used(cache):
    """Least recently used means used: the builder's hits refresh the marker that pruning sorts by."""
    key = "k" * 64
    obj = make_object(key, 100, 3 * DAY)
    meta = obj.with_suffix(".json")
    meta.write_text(json.dumps({"sha256": build_cache.file_sha(obj), "log": ""}))
    _age(meta, 3 * DAY)
    assert build._cached_object(key) is not None
    assert time.time() - meta.stat().st_mtime < 60

    plan = plan_build("ks_touch", "int f() { return 1; }", with_cuda=False)
    entry = build_cache.extension_dir(plan.key)
    entry.mkdir(parents=True)
    (entry / "lib.so").write_bytes(b"so")
    (entry / "build.json").write_text(json.dumps({"key": plan.key, "so": "lib.so",
                                                  "so_sha256": build_cache.file_sha(entry / "lib.so")}))
    _age(entry / "build.json", 3 * DAY)
    assert build._finished(plan, time.perf_counter()).cache_hit
    assert time.time() - (entry / "build.json").stat().st_mtime < 60


def test_limit_from_the_environment_and_auto_prune(cache, monkeypatch, capsys):
    make_extension("a", 4000, 3 * DAY)
    make_extension("b", 4000, 2 * DAY)
    make_extension("c", 4000, 1 * DAY)
    monkeypatch.setenv(build_cache.LIMIT_ENV, "off")
    assert build_cache.limit_bytes() is None and build_cache.auto_prune() is None
    monkeypatch.setenv(build_cache.LIMIT_ENV, str(11000 / 1024**3))  # GiB: just under the 12006 bytes held
    report = build_cache.auto_prune()
    assert names(report) == [ext("a")]  # 8004 bytes left: under 80% of the limit (8800)
    assert "above KERNELSKILL_CACHE_MAX_GB" in capsys.readouterr().err
    assert build_cache.auto_prune() is None  # under the limit now: nothing to do
    monkeypatch.setenv(build_cache.LIMIT_ENV, "lots")
    assert build_cache.auto_prune() is None
    assert "set it to a number of GiB" in capsys.readouterr().err


def test_sizes_and_durations():
    assert build_cache.parse_size("500M") == 500 * 1024**2
    assert build_cache.parse_size("1.5GB") == int(1.5 * 1024**3)
    assert build_cache.parse_size("0") == 0
    assert build_cache.parse_duration("30d") == 30 * DAY and build_cache.parse_duration("90m") == 5400
    with pytest.raises(ValueError, match="not a size"):
        build_cache.parse_size("12Q")
    with pytest.raises(ValueError, match="not a duration"):
        build_cache.parse_duration("soon")


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KERNELSKILL_CACHE": str(cache)}
    env.pop(build_cache.LIMIT_ENV, None)
    return subprocess.run([sys.executable, "-m", "kernelskill.cli", "cache", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_a_candidates_own_caches_are_listed_and_pruned_least_recently_used_first(cache):
    from kernelskill.review.caches import runner_caches, sandbox_cache_root

    runner_caches(False, owner="a" * 24)  # as a review of that candidate makes them
    runner_caches(False, owner="b" * 24)
    for owner, ago in (("a", 3 * DAY), ("b", 60.0)):
        folder = sandbox_cache_root(os.geteuid()) / "candidates" / (owner * 24)
        (folder / "kernelskill" / "blob").write_bytes(b"x" * 1000)
        _age(folder, ago)
    found = {e.name: e for e in build_cache.entries() if e.kind == "candidate"}
    assert set(found) == {"a" * 24, "b" * 24} and found["a" * 24].bytes == 1000
    report = build_cache.prune(older_than_s=DAY)
    assert [e.name for e in build_cache.entries() if e.kind == "candidate"] == ["b" * 24]
    assert report.bytes_after < report.bytes_before


def test_cache_command(cache):
    make_extension("a", 1000, 2 * DAY)
    make_pch("p", 3000, 3 * DAY)
    shown = _cli("show", "--json", cache=cache)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["total_bytes"] == 1002 + 3002
    dry = _cli("prune", "--all", "--dry-run", "--json", cache=cache)
    assert dry.returncode == 0, dry.stderr
    assert {e["name"] for e in json.loads(dry.stdout)["removed"]} == {ext("a"), "p"}
    assert len(build_cache.entries()) == 2
    real = _cli("prune", "--max-size", "2K", cache=cache)
    assert real.returncode == 0, real.stderr
    assert "removed pch" in real.stdout and [e.name for e in build_cache.entries()] == [ext("a")]
    text = _cli("show", cache=cache)
    assert "extension" in text.stdout and "limit: 20.00 GiB" in text.stdout
    assert f"precompiled headers: {build_cache.headers_dir()}" in text.stdout  # where its `pch` entries are
    bad = _cli("prune", "--older-than", "soon", cache=cache)
    assert bad.returncode == 2 and "not a duration" in bad.stderr
