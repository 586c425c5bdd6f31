"""Check the speed-of-light floor against what a bench run measured: no reference, and no honest kernel, may beat
the hard floor; a kernel below the reference's floor does less work than the reference's algorithm.

    PYTHONPATH=src python scripts/sol_check.py RUN_DIR [--gpu h200] [--json OUT.json]

For every task of the run (its latest review), the problem's work is counted on the meta device in this process
(review/work.py's measurement; the problems are the benchmark's, not candidate code) and set against the reference's
and the candidate's measured times. Prints the tasks whose reference or correct kernel is below a floor, and how
near the correct kernels come (percent of the reference's floor). Runs on a CPU.
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import statistics
import sys
from pathlib import Path

from kernelskill.review.roofline import floor_ms, hard_floor_ms
from kernelskill.review.work import _measure


def latest_reviews(run: Path) -> dict[str, tuple[Path, dict]]:
    db = sqlite3.connect(f"file:{run / 'run.db'}?mode=ro", uri=True)
    rows = db.execute("SELECT t.name, t.problem_path, r.result_json FROM reviews r JOIN candidates c ON "
                      "c.id = r.candidate_id JOIN tasks t ON t.id = c.task_id WHERE r.purpose = 'verdict' "
                      "ORDER BY r.id").fetchall()
    return {f"L{Path(p).parent.name.removeprefix('level')}/{n}": (Path(p), json.loads(r)) for n, p, r in rows}


def _alarm(*_):
    raise TimeoutError("over 60 s on the meta device")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    rows = []
    for key, (problem, review) in sorted(latest_reviews(args.run).items()):
        path = problem if problem.is_absolute() else args.run.parent / problem
        if not path.exists():
            path = Path.cwd() / problem
        signal.alarm(60)
        try:
            work, error = _measure(path), None
        except Exception as exc:  # noqa: BLE001 - one problem that cannot be counted is reported, not fatal
            work, error = None, f"{type(exc).__name__}: {str(exc)[:120]}"
        finally:
            signal.alarm(0)
        timing = review.get("timing") or {}
        row = {"task": key, "error": error, "correct": bool((review.get("policy") or {}).get("correct_kernelbench")),
               "ref_ms": (timing.get("reference") or {}).get("median_ms"),
               "cand_ms": (timing.get("candidate") or {}).get("median_ms")}
        if work:
            row.update(work, sol_ms=floor_ms(work["flops"], work["bytes"], work["precision"], args.gpu),
                       hard_ms=hard_floor_ms(work["output_bytes"], args.gpu))
        rows.append(row)
    counted = [r for r in rows if r.get("sol_ms")]
    print(f"{len(rows)} tasks, {len(counted)} with a floor; not counted: "
          + ("; ".join(f"{r['task']} ({r['error']})" for r in rows if r["error"]) or "none"))
    for label, side in (("reference", "ref_ms"), ("correct kernel", "cand_ms")):
        timed = [r for r in counted if r[side] and (side == "ref_ms" or r["correct"])]
        hard = [r for r in timed if r["hard_ms"] and r[side] < r["hard_ms"]]
        soft = [r for r in timed if r[side] < r["sol_ms"]]
        print(f"{label}: {len(timed)} timed, {len(hard)} below the hard floor, {len(soft)} below the reference's floor")
        for r in soft:
            print(f"  {r['task']}: {r[side]:.4g} ms, floor {r['sol_ms']:.4g} ms ({r['flops']:.3g} FLOP, "
                  f"{r['bytes'] / 1e6:.1f} MB, {r['precision']}), hard floor {r['hard_ms']:.3g} ms")
    pct = [r["sol_ms"] / r["cand_ms"] * 100 for r in counted if r["correct"] and r["cand_ms"]]
    if pct:
        print(f"correct kernels reach {statistics.median(pct):.2g}% of the floor (median; max {max(pct):.3g}%)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
