"""Finding the tasks: a KernelBench checkout (`KernelBench/level1..3`), a folder of `level*` folders, or any folder
of KernelBench-format files (one level named after the folder). Tasks are ordered by their numeric prefix."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelskill.errors import KernelSkillError

_PREFIX = re.compile(r"^(\d+)")
_LEVEL_DIR = re.compile(r"^level[_-]?(\w+)$", re.IGNORECASE)


@dataclass(frozen=True)
class BenchTask:
    name: str  # file stem, unique in a run: "19_ReLU", or "L2/19_ReLU" when two levels share a stem
    level: str  # "1", "2", "3", or the folder's name
    index: int | None  # the numeric prefix of the file name
    path: Path


def parse_indices(spec: str | None) -> set[int] | None:
    """`--tasks 1-20,33` → {1..20, 33}; None or empty → all."""
    if not spec:
        return None
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise KernelSkillError(f"--tasks: cannot read {part!r}; write numbers and ranges, e.g. --tasks 1-20,33")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise KernelSkillError(f"--tasks: the range {part!r} runs backwards; write {hi}-{lo}")
        out.update(range(lo, hi + 1))
    return out


def parse_levels(spec: str | None) -> set[str] | None:
    if not spec:
        return None
    return {p.strip() for p in spec.split(",") if p.strip()}


def parse_gpus(spec: str | None) -> list[str] | None:
    """`--gpus 0,1` → ["0", "1"]; None → None (every visible GPU)."""
    if spec is None:
        return None
    items = [p.strip() for p in spec.split(",") if p.strip()]
    for item in items:
        if not item.isdigit():
            raise KernelSkillError(f"--gpus: {item!r} is not a GPU index; write e.g. --gpus 0,1")
    return items


def _level_dirs(root: Path) -> dict[str, Path]:
    base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    found = {}
    for child in sorted(base.iterdir()):
        m = _LEVEL_DIR.match(child.name)
        if child.is_dir() and m:
            found[m.group(1)] = child
    return found


def discover(root: Path, levels: set[str] | None = None, indices: set[int] | None = None) -> list[BenchTask]:
    root = Path(root).expanduser()
    if not root.is_dir():
        raise KernelSkillError(f"--problems {root}: no such folder (give a KernelBench checkout or a folder of "
                               "problem files)")
    dirs = _level_dirs(root) or {root.name: root}
    if levels is not None:
        unknown = levels - set(dirs)
        if unknown:
            raise KernelSkillError(f"--level {','.join(sorted(unknown))}: not in {root} (it has levels "
                                   f"{', '.join(dirs)})")
        dirs = {k: v for k, v in dirs.items() if k in levels}
    tasks: list[BenchTask] = []
    for level, folder in dirs.items():
        for path in folder.glob("*.py"):
            if path.name.startswith("_"):
                continue
            m = _PREFIX.match(path.stem)
            index = int(m.group(1)) if m else None
            if indices is not None and index not in indices:
                continue
            tasks.append(BenchTask(name=path.stem, level=level, index=index, path=path))
    stems = [t.name for t in tasks]
    tasks = [t if stems.count(t.name) == 1 else BenchTask(f"L{t.level}/{t.name}", t.level, t.index, t.path)
             for t in tasks]
    tasks.sort(key=lambda t: (_level_key(t.level), t.index if t.index is not None else 1 << 30, t.name))
    if not tasks:
        what = " matching --tasks/--level" if indices is not None or levels is not None else ""
        raise KernelSkillError(f"no problem files{what} under {root}")
    return tasks


def _level_key(level: str) -> tuple[int, int | str]:
    return (0, int(level)) if level.isdigit() else (1, level)
