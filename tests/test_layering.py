"""The package's floors: a module imports only from its own floor or below, also in function-level (lazy) imports.

Lowest first. A new module goes on the lowest floor its imports allow; a needed import that breaks the order means
the code belongs elsewhere (e.g. llm/ must not reach for agents/ to format a reply).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "kernelskill"
FLOORS = [
    {"errors"},
    {"kernelskill", "settings", "candidate", "problem", "folders", "redact", "cli_help"},  # "kernelskill": the package root
    {"review", "llm", "store"},
    {"memory", "report", "doctor"},
    {"agents"},
    {"loop"},
    {"bench"},
    {"cli"},
]
FLOOR = {name: i for i, names in enumerate(FLOORS) for name in names}


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
