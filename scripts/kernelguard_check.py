"""KernelGuard (GPU MODE's rule-based hack detector, on PyPI) beside our static checks, on our cheat and attack
fixtures, the public fixtures and a corpus of published kernels: where would it be a second opinion that knows
classes ours does not? Static only: nothing here runs a kernel.

    pip install kernelguard==0.3.2
    python scripts/kernelguard_check.py [--corpus .devdata/corpus/kernels]

Prints, per group, KernelGuard's classification of each file that it does not call `valid` (with its rules) beside
what ours does before anything runs (safety checks: refused; strict-only checks), and the counts.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelskill.review.static_checks import split_findings, static_checks  # noqa: E402

DATA = ROOT / "tests" / "data"


def ours(source: str) -> str:
    try:
        safety, strict = split_findings(static_checks(source, "candidate.py"))
    except SyntaxError:
        return "syntax error"
    if safety:
        return "refused: " + ",".join(sorted({f.name for f in safety}))
    return ("strict-only: " + ",".join(sorted({f.name for f in strict}))) if strict else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="a folder of published kernels (e.g. CUDA-L1's, imported)")
    args = parser.parse_args()
    try:
        import kernelguard
    except ImportError:
        sys.exit("kernelguard is not installed: pip install kernelguard==0.3.2")
    groups = {"cheats": sorted((DATA / "cheats").glob("*.py")), "attacks": sorted((DATA / "attacks").glob("*.py")),
              "public": sorted((DATA / "public").rglob("*kernel*.py"))}
    if args.corpus:
        groups["corpus"] = sorted(args.corpus.rglob("*.py"))
    for group, files in groups.items():
        counts: collections.Counter[str] = collections.Counter()
        for path in files:
            source = path.read_text(errors="replace")
            try:
                found = kernelguard.analyze_code(source)
            except Exception as exc:  # noqa: BLE001 - its failure is a row of the table
                counts["kernelguard failed"] += 1
                print(f"{group:8} {path.name[:48]:48} kernelguard failed: {type(exc).__name__}")
                continue
            label = found["classification"]
            counts[label] += 1
            if label != "valid":
                rules = sorted({str(m.get("pattern")) for m in found["matched_patterns"]})
                print(f"{group:8} {path.name[:48]:48} {label:15} {','.join(rules)[:60]:60} ours: {ours(source)}")
        print(f"== {group}: {len(files)} files, KernelGuard: {dict(counts)}")


if __name__ == "__main__":
    main()
