"""The on-disk cache of CUDA builds and compile checks: where it lives, what it holds, and keeping it in bounds.

Layout under `$KERNELSKILL_CACHE` (default `~/.cache/kernelskill`):

    cuda-build/<key>/          finished extensions; `build.json` is written last and marks one complete
    cuda-build/obj/<key>.o     compiled objects, each with `<key>.json` written after it
    cuda-build/locks/          one lock file per key (empty; never removed, see below)
    cuda-build/.tmp-*          a build in progress, or left behind by a killed one
    cuda-build/failed/<key>.json  sources that failed to compile in their own lines: the error and the log
    cuda-check/<key>.json      CPU compile-check results of versions before the check used the builder

Each candidate's runners keep their builds and JIT kernels in caches of their own (`candidate`, one folder per
source, under the sandbox's cache root): listed and pruned here too, least recently used first.
The precompiled headers (`pch`, one per flag set, about 700 MB each) are kept apart, in the harness's own folder
(`headers_dir`, see kernelskill.review.caches); they are listed and pruned with the rest.

Every use of an entry refreshes its modification time (`touch`), so pruning removes the least recently used first.
An entry is never removed while its lock is held or when it was used within `IN_USE_S`: a build that has just found
an object or the precompiled header goes on to use its path. Lock files stay: removing one while a process waits on
it would let two builders hold "the" lock at once.

A failure is remembered only when the compiler's errors point at the candidate's own lines: for the same sources,
flags and toolchain (all in the key) the verdict cannot change, so the next review gives it without compiling.

Nothing here imports torch or pydantic: `kernelskill cache` (review/cache_cli.py) reads and prunes the cache
without either.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelskill.review.caches import HEADERS_VAR, SANDBOX_UID, headers_root, sandbox_cache_root

IN_USE_S = 600.0
"""Entries used within this many seconds are kept by any prune."""
STALE_TMP_S = 6 * 3600.0
"""A temporary build folder or file this old belongs to no live build (compile stages time out long before)."""
DEFAULT_LIMIT_GB = 20.0
LIMIT_ENV = "KERNELSKILL_CACHE_MAX_GB"
AUTO_PRUNE_TO = 0.8
"""An automatic prune goes down to this fraction of the limit, so the next runs do not prune again at once."""

KINDS = ("extension", "object", "pch", "candidate", "check", "failure", "unfinished")


def root() -> Path:
    return Path(os.environ.get("KERNELSKILL_CACHE") or Path.home() / ".cache" / "kernelskill")


def build_dir() -> Path:
    return root() / "cuda-build"


def check_dir() -> Path:
    return root() / "cuda-check"


def locks_dir() -> Path:
    return build_dir() / "locks"


def failures_dir() -> Path:
    return build_dir() / "failed"


def remembered_failure(key: str) -> dict | None:
    """The compile failure recorded for the build `key` ({"message", "log", ...}), or None."""
    path = failures_dir() / f"{key[:32]}.json"
    try:
        info = json.loads(path.read_text())
        if info.get("key") != key or not isinstance(info.get("message"), str):
            return None
    except (OSError, ValueError):
        return None
    touch(path)
    return info


def remember_failure(key: str, message: str, log: str) -> None:
    """Record that the build `key` fails in the candidate's own code; a cache that cannot be written is left be."""
    directory = failures_dir()
    tmp = directory / f".{key[:32]}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        directory.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"key": key, "message": message, "log": log, "created": time.time()}))
        os.replace(tmp, directory / f"{key[:32]}.json")


# The one naming of the lock files: the builder takes these locks and pruning respects them.
def extension_lock(key: str) -> Path:
    """Guards `cuda-build/<key[:32]>/`, a finished extension."""
    return locks_dir() / f"{key[:32]}.lock"


def object_lock(key: str) -> Path:
    """Guards `cuda-build/obj/<key>.o` and its `.json`."""
    return locks_dir() / f"obj-{key[:32]}.lock"


def pch_lock(name: str, root: Path | None = None) -> Path:
    """Guards `<headers>/<name>/`, a precompiled header (`root`: the headers' folder, default `headers_dir()`)."""
    return (root or headers_dir()) / "locks" / f"pch-{name}.lock"


def headers_dir() -> Path:
    """The precompiled headers' folder, the harness's (kernelskill.review.caches.headers_root): it builds them there,
    its sandboxed runners only read them (HEADERS_VAR names it for them)."""
    chosen = os.environ.get(HEADERS_VAR)
    return Path(chosen) if chosen else headers_root()


def candidate_roots() -> list[Path]:
    """The folders of the candidates' own caches, for a harness that drops its runners to nobody and for one that
    does not."""
    roots = dict.fromkeys(sandbox_cache_root(uid) / "candidates" for uid in (SANDBOX_UID, os.geteuid()))
    return [r for r in roots if r.is_dir()]


def headers_read_only() -> bool:
    """Whether this process only reads the precompiled headers (a sandboxed runner)."""
    return bool(os.environ.get(HEADERS_VAR))


@contextlib.contextmanager
def flock(path: Path, blocking: bool = True):
    """An exclusive lock held for the block; yields False when `blocking` is off and another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing releases the lock


def file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def touch(path: Path) -> None:
    """Mark an entry as used now (its marker file's modification time); a read-only cache is left as it is."""
    with contextlib.suppress(OSError):
        os.utime(path)


# ------------------------------------------------------------------------------------------------------ object store
def objects_dir() -> Path:
    return build_dir() / "obj"


def load_object(key: str) -> tuple[Path, dict] | None:
    """A cached object and its record (log, notes, whether the precompiled header was used), when both are there and
    the object matches its record. Finding one marks it as used."""
    path, meta = objects_dir() / f"{key}.o", objects_dir() / f"{key}.json"
    try:
        info = json.loads(meta.read_text())
        if info["sha256"] != file_sha(path):
            return None
    except (OSError, ValueError, KeyError):
        return None
    touch(meta)  # used now: pruning removes the least recently used first
    return path, info


def store_object(key: str, built: Path, info: dict) -> Path:
    """Copy a compiled object into the store; its record is written last (an object without one is not trusted)."""
    directory = objects_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{key}.o"
    tmp = directory / f".{key}.{os.getpid()}.tmp"
    shutil.copyfile(built, tmp)
    os.replace(tmp, target)
    meta_tmp = directory / f".{key}.{os.getpid()}.json.tmp"
    meta_tmp.write_text(json.dumps({"sha256": file_sha(target), **info}))
    os.replace(meta_tmp, directory / f"{key}.json")
    return target


def extension_dir(key: str) -> Path:
    """Where the finished extension of build key `key` lives."""
    return build_dir() / key[:32]


# ------------------------------------------------------------------------------------------------------------ entries
@dataclass
class Entry:
    """One removable unit of the cache: its files, their size, when it was last used and the lock guarding it."""

    kind: str
    name: str
    paths: list[Path]
    bytes: int
    last_used: float
    lock: Path | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "bytes": self.bytes, "last_used": round(self.last_used, 3),
                "paths": [str(p) for p in self.paths]}


def _size(path: Path) -> int:
    try:
        if path.is_symlink() or not path.is_dir():
            return path.lstat().st_size
        total = 0
        for base, _dirs, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(base, name)).st_size
        return total
    except OSError:
        return 0


def _mtime(path: Path, default: float = 0.0) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return default


_EXTENSION_DIR = re.compile(r"^[0-9a-f]{32}$")


def entries() -> list[Entry]:
    """Everything in the cache, as removable entries (an entry whose marker is missing counts as last used never)."""
    found: list[Entry] = []
    build = build_dir()
    if build.is_dir():
        for path in sorted(build.iterdir()):
            if path.name.startswith((".tmp-", ".trash-")):
                # a folder being renamed into place may vanish between listing and stat: then it is not reported
                used = 0.0 if path.name.startswith(".trash-") else _mtime(path, time.time())
                found.append(Entry("unfinished", path.name, [path], _size(path), used))
            elif path.is_dir() and _EXTENSION_DIR.match(path.name):
                found.append(Entry("extension", path.name, [path], _size(path), _mtime(path / "build.json"),
                                   extension_lock(path.name)))
    objects = objects_dir()
    if objects.is_dir():
        for path in sorted(objects.iterdir()):
            if path.name.startswith("."):  # a copy in progress, or left behind by a killed build
                found.append(Entry("unfinished", f"obj/{path.name}", [path], _size(path), _mtime(path, time.time())))
            elif path.suffix == ".o":
                meta = path.with_suffix(".json")
                found.append(Entry("object", path.stem, [meta, path], _size(path) + _size(meta), _mtime(meta),
                                   object_lock(path.stem)))
            elif path.suffix == ".json" and not path.with_suffix(".o").exists():
                found.append(Entry("object", path.stem, [path], _size(path), 0.0))
    failed = failures_dir()
    if failed.is_dir():
        for path in sorted(failed.iterdir()):
            if path.name.startswith("."):
                found.append(Entry("unfinished", f"failed/{path.name}", [path], _size(path), _mtime(path, time.time())))
            else:
                found.append(Entry("failure", path.stem, [path], _size(path), _mtime(path)))
    pch = headers_dir()
    if pch.is_dir():
        for path in sorted(p for p in pch.iterdir() if p.is_dir() and p.name != "locks"):
            found.append(Entry("pch", path.name, [path], _size(path), _mtime(path / "pch.json"),
                               pch_lock(path.name, pch)))
    for candidates in candidate_roots():  # each candidate's runners' own caches (kernelskill.review.caches)
        for path in sorted(p for p in candidates.iterdir() if p.is_dir()):
            found.append(Entry("candidate", path.name, [path], _size(path), _mtime(path)))
    checks = check_dir()
    if checks.is_dir():
        for path in sorted(checks.iterdir()):
            if path.name.startswith("."):
                found.append(Entry("unfinished", f"check/{path.name}", [path], _size(path), _mtime(path, time.time())))
            else:
                found.append(Entry("check", path.stem, [path], _size(path), _mtime(path)))
    return found


@dataclass
class KindUsage:
    kind: str
    entries: int = 0
    bytes: int = 0
    oldest_use: float | None = None
    newest_use: float | None = None


@dataclass
class CacheUsage:
    """What `kernelskill cache show` prints."""

    root: str
    limit_bytes: int | None
    total_bytes: int
    kinds: list[KindUsage] = field(default_factory=list)
    headers: str = ""  # the precompiled headers' folder (the harness's; its runners only read it)
    candidates: list[str] = field(default_factory=list)  # the folders of the candidates' own caches

    def to_dict(self) -> dict:
        return asdict(self)


def usage(found: list[Entry] | None = None) -> CacheUsage:
    found = entries() if found is None else found
    kinds = {kind: KindUsage(kind) for kind in KINDS}
    for entry in found:
        k = kinds[entry.kind]
        k.entries += 1
        k.bytes += entry.bytes
        if entry.last_used:
            k.oldest_use = entry.last_used if k.oldest_use is None else min(k.oldest_use, entry.last_used)
            k.newest_use = entry.last_used if k.newest_use is None else max(k.newest_use, entry.last_used)
    return CacheUsage(str(root()), limit_bytes(), sum(e.bytes for e in found), list(kinds.values()),
                      str(headers_dir()), [str(r) for r in candidate_roots()])


# ------------------------------------------------------------------------------------------------------------ pruning
@dataclass
class PruneReport:
    """What a prune removed (or, with dry_run, would remove) and what it kept because it was in use."""

    root: str
    dry_run: bool
    bytes_before: int
    bytes_after: int
    removed: list[dict] = field(default_factory=list)
    kept_in_use: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def freed(self) -> int:
        return self.bytes_before - self.bytes_after

    def to_dict(self) -> dict:
        return {**asdict(self), "freed_bytes": self.freed}


def _remove(entry: Entry) -> None:
    """Take an entry out of the cache. A folder is first renamed out of the way, so no reader sees half of it."""
    if entry.kind == "object":
        for path in entry.paths:  # the .json first: an object without it is not trusted
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return
    for path in entry.paths:
        if path.is_dir() and not path.is_symlink():
            trash = path if path.name.startswith(".trash-") else path.with_name(f".trash-{uuid.uuid4().hex[:12]}")
            if trash != path:
                os.rename(path, trash)
            shutil.rmtree(trash)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _left_behind(entry: Entry, now: float) -> bool:
    """What a killed build or an interrupted removal left: always removable."""
    return entry.kind == "unfinished" and (entry.name.startswith(".trash-") or now - entry.last_used > STALE_TMP_S)


def _last_used_now(entry: Entry) -> float:
    marker = {"extension": "build.json", "pch": "pch.json"}.get(entry.kind)
    return _mtime(entry.paths[0] / marker if marker else entry.paths[0])


def prune(max_bytes: int | None = None, older_than_s: float | None = None, dry_run: bool = False,
          now: float | None = None) -> PruneReport:
    """Remove entries unused for `older_than_s`, then the least recently used ones until the cache holds at most
    `max_bytes`, and always what killed builds left behind. Entries that are locked or were used within IN_USE_S
    are kept (and reported), even if the cache then stays above `max_bytes`."""
    now = time.time() if now is None else now
    found = sorted(entries(), key=lambda e: e.last_used)
    total = sum(e.bytes for e in found)
    report = PruneReport(str(root()), dry_run, total, total)
    for entry in found:
        stale_tmp = _left_behind(entry, now)
        too_old = older_than_s is not None and now - entry.last_used > older_than_s and entry.kind != "unfinished"
        too_big = max_bytes is not None and report.bytes_after > max_bytes and entry.kind != "unfinished"
        if not (stale_tmp or too_old or too_big):
            continue
        if entry.kind != "unfinished" and now - entry.last_used < IN_USE_S:
            report.kept_in_use.append({**entry.to_dict(), "why": f"used in the last {IN_USE_S:.0f} s"})
            continue
        with contextlib.ExitStack() as stack:
            if entry.lock is not None and not stack.enter_context(flock(entry.lock, blocking=False)):
                report.kept_in_use.append({**entry.to_dict(), "why": "locked by a build"})
                continue
            if entry.kind != "unfinished" and _last_used_now(entry) > entry.last_used:  # used since it was listed
                report.kept_in_use.append({**entry.to_dict(), "why": "used while pruning"})
                continue
            if not dry_run:
                try:
                    _remove(entry)
                except OSError as exc:
                    report.errors.append(f"{entry.kind} {entry.name}: {exc}")
                    continue
        report.removed.append(entry.to_dict())
        report.bytes_after -= entry.bytes
    return report


# ------------------------------------------------------------------------------------------------------------- limits
def parse_size(text: str) -> int:
    """"500M", "20G", "1.5GB", "0" -> bytes (binary units: 1G = 1024**3)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match:
        raise ValueError(f"{text!r} is not a size: write a number with an optional unit, e.g. 500M, 20G or 1.5GB")
    number, unit = float(match.group(1)), match.group(2)
    return int(number * 1024 ** " kmgt".index(unit or " "))


def parse_duration(text: str) -> float:
    """"90m", "12h", "30d", "45s" -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text.lower())
    if not match:
        raise ValueError(f"{text!r} is not a duration: write a number and a unit (s, m, h, d or w), e.g. 30d")
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]


def limit_bytes() -> int | None:
    """The size the cache is kept under, from KERNELSKILL_CACHE_MAX_GB (default 20; "off" or 0: no limit)."""
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if not raw:
        return int(DEFAULT_LIMIT_GB * 1024**3)
    if raw.lower() in ("off", "none", "0"):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{LIMIT_ENV}={raw!r}: set it to a number of GiB (e.g. 20) or to off") from None
    if value < 0:
        raise ValueError(f"{LIMIT_ENV}={raw!r}: set it to a positive number of GiB (e.g. 20) or to off")
    return int(value * 1024**3)


def auto_prune() -> PruneReport | None:
    """At the start of a CUDA run: when the cache is above its limit, prune it down to AUTO_PRUNE_TO of the limit and
    say so on stderr. Returns the report, or None when nothing needed doing."""
    try:
        limit = limit_bytes()
    except ValueError as exc:
        print(f"kernelskill: the build cache is not pruned: {exc}", file=sys.stderr)
        return None
    if limit is None:
        return None
    found, now = entries(), time.time()
    if sum(e.bytes for e in found) <= limit and not any(_left_behind(e, now) for e in found):
        return None
    report = prune(max_bytes=int(limit * AUTO_PRUNE_TO))
    if report.removed:
        print(f"kernelskill: the build cache at {report.root} was above {LIMIT_ENV}={limit / 1024**3:g}: removed "
              f"{len(report.removed)} least recently used entries ({report.freed / 1024**2:.0f} MiB); "
              f"{report.bytes_after / 1024**2:.0f} MiB left", file=sys.stderr)
    for error in report.errors:
        print(f"kernelskill: could not remove a cache entry: {error}", file=sys.stderr)
    return report
