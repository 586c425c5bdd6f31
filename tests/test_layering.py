"""The package's floors: a module imports only from its own floor or below, also in function-level (lazy) imports.

Lowest first. A new module goes on the lowest floor its imports allow; a needed import that breaks the order means
the code belongs elsewhere (e.g. llm/ must not reach for agents/ to format a reply). memory/ has floors of its own,
so its knowledge never depends on the code that reads it; and no module grows past MAX_LINES.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "kernelskill"
FLOORS = [
    {"errors"},
    {"kernelskill", "settings", "candidate", "problem", "folders", "redact", "cli_help"},  # "kernelskill": the package root
    {"review", "llm", "store", "profiling"},  # profiling only measures: it never reads the knowledge base
    {"memory", "doctor"},
    {"agents"},
    {"loop"},
    {"report"},  # reads what runs came to (loop/outcome.py) from the store
    {"bench"},
    {"cli"},
]
FLOOR = {name: i for i, names in enumerate(FLOORS) for name in names}
# Inside memory/, lowest first: the YAML and its loader know nothing of the code that reads them; the policy reads
# features; the tools (CLI, bench, learn, render) sit on top. The package's __init__ (its public face) may import all.
MEMORY_FLOORS = [{"knowledge"}, {"features"}, {"policy"}, {"tools"}]
MEMORY_FLOOR = {name: i for i, names in enumerate(MEMORY_FLOORS) for name in names}
MAX_LINES = 500


def _unit(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else ("kernelskill" if rel.stem == "__init__" else rel.stem)


def imports_by_unit() -> dict[tuple[str, str], str]:
    """(importing file, imported unit) -> importing unit, for every kernelskill import in src/."""
    found = {}
    for path in SRC.rglob("*.py"):
        unit = _unit(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                parts = name.split(".")
                if parts[0] == "kernelskill":
                    found[(str(path.relative_to(SRC)), parts[1] if len(parts) > 1 else "kernelskill")] = unit
    return found


def test_every_unit_has_a_floor():
    units = {_unit(p) for p in SRC.rglob("*.py")}
    assert units <= set(FLOOR), f"put these on a floor in tests/test_layering.py: {sorted(units - set(FLOOR))}"


def test_no_import_runs_up_a_floor():
    upward = sorted(f"{where} imports kernelskill.{target} (floor {FLOOR[target]}) from floor {FLOOR[unit]}"
                    for (where, target), unit in imports_by_unit().items()
                    if target in FLOOR and unit in FLOOR and FLOOR[target] > FLOOR[unit])
    assert not upward, "\n".join(upward)


def _memory_imports() -> list[tuple[str, str, str]]:
    """(importing file, its memory/ sub-package, imported memory/ sub-package) for every import inside memory/."""
    found = []
    for path in (SRC / "memory").rglob("*.py"):
        rel = path.relative_to(SRC / "memory")
        if len(rel.parts) < 2:
            continue  # memory/__init__.py: the public face
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["kernelskill", "memory"]:
                    found.append((str(rel), rel.parts[0], parts[2] if len(parts) > 2 else "memory"))
    return found


def test_memory_has_only_its_floors():
    assert {p.parent.name for p in (SRC / "memory").rglob("*.py") if p.parent != SRC / "memory"} == set(MEMORY_FLOOR)
    assert [p.name for p in (SRC / "memory").glob("*.py")] == ["__init__.py"], "memory/ modules belong in a floor"


def test_no_memory_import_runs_up_a_floor():
    imports = _memory_imports()
    assert any(sub == "knowledge" for _, _, sub in imports), "the scan found no memory/ imports: it reads nothing"
    upward = sorted(f"memory/{where} imports memory.{target} from memory/{unit}" for where, unit, target in imports
                    if target not in MEMORY_FLOOR or MEMORY_FLOOR[target] > MEMORY_FLOOR[unit])
    assert not upward, "\n".join(upward)


def test_no_module_is_too_long():
    long = sorted(f"{p.relative_to(SRC)}: {n} lines" for p in SRC.rglob("*.py")
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
    assert not long, f"split these (one concept per module, at most {MAX_LINES} lines):\n" + "\n".join(long)
