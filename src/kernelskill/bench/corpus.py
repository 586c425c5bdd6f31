"""`kernelskill corpus import|show`: turn a public set of published kernels into a corpus folder (llm/corpus.py).

Accepted sources:
- a JSON or JSON Lines file of records, one per task, as CUDA-L1 releases them (`level_id`, `task_id`, `ref_code`,
  `custom_code`) or with the other common names (`level`, `problem_id`, `ref_arch_src`, `kernel`, `code` ...);
  numeric fields beside them (the source's own speedups) are kept in each entry's `meta`;
- a folder of kernel files named like KernelBench's problems, `level<L>/<N>_<anything>.py` (or any folder of
  `<N>_*.py`, one level named by --level), each defining `ModelNew`.

`--names-from` a KernelBench checkout (or folder of `level<L>` folders) names each task after the problem file of
the same level and number, and supplies the reference when the source has none. A record without a kernel stays in
the index, with the reason, so a benchmark over the corpus says what was not published instead of dropping it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import typer

from kernelskill.cli_help import GroupedCommand, sub_app
from kernelskill.errors import KernelSkillError
from kernelskill.folders import write_atomically
from kernelskill.llm.corpus import CorpusEntry, CorpusIndex, normalize, read_index, source_sha, write_index

_LEVEL = ("level_id", "level")
_TASK = ("task_id", "problem_id", "index", "task", "id")
_REFERENCE = ("ref_code", "ref_arch_src", "problem_source", "reference", "ref_src")
_KERNEL = ("custom_code", "kernel", "kernel_code", "custom_kernel", "model_new_src", "code", "solution")
_LEVEL_DIR = re.compile(r"^level[_-]?(\w+)$", re.IGNORECASE)
_NUMBERED = re.compile(r"^(\d+)_")


def _pick(record: dict, keys: tuple[str, ...]):
    return next((record[k] for k in keys if record.get(k) not in (None, "")), None)


def _records(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if doc is None:
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise KernelSkillError(f"{path}: line {n} is not JSON ({exc.msg}); expected a JSON list of "
                                           "records or one record a line") from None
        return records
    if isinstance(doc, dict):
        doc = next((v for v in doc.values() if isinstance(v, list)), [doc] if _pick(doc, _KERNEL) else None)
    if not isinstance(doc, list):
        raise KernelSkillError(f"{path}: expected a list of records (one per task), or one record a line")
    return doc


def _problem_files(root: Path | None) -> dict[tuple[str, int], Path]:
    """(level, number) -> problem file, from a KernelBench checkout or a folder of level folders."""
    if root is None:
        return {}
    base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    found: dict[tuple[str, int], Path] = {}
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        m = _LEVEL_DIR.match(folder.name)
        if not m:
            continue
        for path in folder.glob("*.py"):
            n = _NUMBERED.match(path.name)
            if n:
                found[(m.group(1), int(n.group(1)))] = path
    if not found:
        raise KernelSkillError(f"--names-from {root}: no level<L>/<N>_*.py problem files there")
    return found


def import_corpus(source: Path, out: Path, names_from: Path | None = None, label: str | None = None,
                  level: str | None = None) -> CorpusIndex:
    """Write the corpus folder `out` from `source` (see the module docstring) and return its index."""
    source, out = Path(source), Path(out)
    if not source.exists():
        raise KernelSkillError(f"{source}: no such file or folder")
    problems = _problem_files(Path(names_from) if names_from else None)
    raw: list[tuple[str, int | None, str | None, str | None, dict]] = []  # level, number, reference, kernel, meta
    if source.is_dir():
        for path in sorted(source.rglob("*.py")):
            m, lvl = _NUMBERED.match(path.name), _LEVEL_DIR.match(path.parent.name)
            if not m:
                continue
            lvl_name = lvl.group(1) if lvl else level
            if lvl_name is None:
                raise KernelSkillError(f"{path}: not in a level<L> folder; say which level with --level")
            raw.append((lvl_name, int(m.group(1)), None, path.read_text(encoding="utf-8"), {"file": path.name}))
    else:
        for i, record in enumerate(_records(source)):
            if not isinstance(record, dict):
                raise KernelSkillError(f"{source}: record {i + 1} is not an object")
            lvl, task = _pick(record, _LEVEL), _pick(record, _TASK)
            if lvl is None and level is None:
                raise KernelSkillError(f"{source}: record {i + 1} has no level ({'/'.join(_LEVEL)}); pass --level")
            meta = {k: v for k, v in record.items() if isinstance(v, (int, float, bool)) and k not in _LEVEL + _TASK}
            raw.append((str(lvl if lvl is not None else level), int(task) if task is not None else None,
                        _pick(record, _REFERENCE), _pick(record, _KERNEL), meta))
    if not raw:
        raise KernelSkillError(f"{source}: no kernels found")

    out.mkdir(parents=True, exist_ok=True)
    entries: list[CorpusEntry] = []
    seen: set[tuple[str, str]] = set()
    for lvl, number, reference, kernel, meta in raw:
        named = problems.get((lvl, number)) if number is not None else None
        name = named.stem if named else f"{number}_task" if number is not None else f"task{len(entries) + 1}"
        if (lvl, name) in seen:
            raise KernelSkillError(f"{source}: two records for level {lvl} task {name}")
        seen.add((lvl, name))
        if reference is None and named is not None:
            reference = named.read_text(encoding="utf-8")
        if named is not None and reference is not None:
            meta["reference_matches_names_from"] = normalize(reference) == normalize(named.read_text(encoding="utf-8"))
        entry = CorpusEntry(level=lvl, index=number, name=name, meta=meta)
        if reference is not None:
            entry.problem = f"problems/level{lvl}/{name}.py"
            entry.problem_sha = source_sha(reference)
            _write(out / entry.problem, reference)
        if kernel and kernel.strip() and kernel.strip() not in ("None", "null"):  # CUDA-L1 writes "None" for none
            entry.kernel = f"kernels/level{lvl}/{name}.py"
            _write(out / entry.kernel, kernel)
        else:
            entry.reason = "the source publishes no kernel for this task (empty record)"
        entries.append(entry)
    index = CorpusIndex(source=label or str(source), entries=entries)
    write_index(out, index)
    return index


def _write(path: Path, text: str) -> None:
    write_atomically(path, text if text.endswith("\n") else text + "\n")


# ------------------------------------------------------------------------------------------------------------- CLI
corpus_app = sub_app("corpus", "Published kernels as a corpus for --model corpus:DIR.")


@corpus_app.command("import", cls=GroupedCommand, epilog="""\
Examples:
  kernelskill corpus import examples/tour/kernels --names-from examples/tour \\
      --out runs/tour-corpus
  kernelskill corpus import CUDA-L1/optimized_cuda_code/h100.json \\
      --names-from KernelBench --out corpora/l1

Then: kernelskill bench --problems corpora/l1/problems --model corpus:corpora/l1
--seeds 1 --rounds 0 (each task's seed is its published kernel).""")
def import_command(
    source: Path = typer.Argument(..., metavar="SOURCE", show_default=False,
                                  help="A JSON / JSON Lines file of published kernels, or a folder of them."),
    out: Path = typer.Option(..., metavar="DIR", help="The corpus folder to write (corpus.json, problems/, "
                             "kernels/)."),
    names_from: Path = typer.Option(None, metavar="DIR", help="A KernelBench checkout: name tasks after its problem "
                                    "files and take references from it where the source has none."),
    label: str = typer.Option(None, metavar="TEXT", help="Where the kernels came from, kept in the index "
                              "(default: SOURCE)."),
    level: str = typer.Option(None, metavar="L", help="The level of records or files that do not say."),
) -> None:
    """Import published kernels as a corpus that `--model corpus:DIR` serves as seeds."""
    index = import_corpus(source, out, names_from, label, level)
    _summary(out, index)


@corpus_app.command("show", cls=GroupedCommand, epilog="""\
Examples:
  kernelskill corpus show runs/tour-corpus""")
def show_command(corpus: Path = typer.Argument(..., metavar="DIR", show_default=False,
                                               help="A corpus folder.")) -> None:
    """What a corpus holds, per level."""
    _summary(corpus, read_index(corpus))


def _summary(root: Path, index: CorpusIndex) -> None:
    levels: dict[str, list[CorpusEntry]] = {}
    for e in index.entries:
        levels.setdefault(e.level, []).append(e)
    typer.echo(f"{root}: {len(index.entries)} tasks from {index.source}")
    for lvl, entries in sorted(levels.items()):
        kernels = sum(e.kernel is not None for e in entries)
        refs = sum(e.problem is not None for e in entries)
        typer.echo(f"  level {lvl}: {len(entries)} tasks, {kernels} with a kernel, {refs} with a reference")
    if any(e.problem for e in index.entries):
        typer.echo(f"bench them: kernelskill bench --problems {root}/problems --model corpus:{root} --seeds 1 "
                   "--rounds 0")
