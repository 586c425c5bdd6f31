"""Reviews a minute of bench runs over the same first tasks, side by side, with where a review's seconds went.

    python scripts/throughput_compare.py RUN [RUN ...] [--first N]

Each RUN is a bench run folder (its run.db) or a reviews file written from one (JSON Lines: a first line with
`run_started`, then one review a line with `task`, `at`, `correct` and `stage_seconds`, as in
docs/h200/build_breakdown/2026-12-06-s12/). The rate over the first N reviews is N over the seconds from the run's
start to the N-th review's end, so runs of one corpus in one order compare like for like; the stage table gives each
stage's median and mean over those reviews.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
from datetime import datetime
from pathlib import Path

STAGES = ("gpu_held", "turn_wait", "queue", "prebuild", "prebuild_start", "prebuild_compile", "verify", "time",
          "reference", "judge_compare", "judge_batch", "judge_kill", "judge_reference_batch", "reference_kill", "wall")


def reviews(path: Path) -> tuple[datetime, list[dict]]:
    if path.is_dir():
        db = sqlite3.connect(f"file:{path / 'run.db'}?mode=ro", uri=True)
        started = json.loads(db.execute("SELECT config_json FROM runs").fetchone()[0])["started"]
        rows = [{"task": json.loads(res)["problem"].split("/")[-1].removesuffix(".py"), "at": at, "correct": bool(ok),
                 "stage_seconds": json.loads(st)}
                for ok, at, st, res in db.execute("SELECT correct, created_at, stage_seconds_json, result_json "
                                                  "FROM reviews ORDER BY created_at")]
    else:
        head, *rest = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        started, rows = head["run_started"], sorted(rest, key=lambda r: r["at"])
    return datetime.fromisoformat(started), rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--first", type=int, default=None, help="reviews counted (default: the fewest any run has)")
    args = p.parse_args()
    loaded = {str(r): reviews(r) for r in args.runs}
    n = args.first or min(len(rows) for _, rows in loaded.values())
    print(f"over the first {n} reviews of each run")
    print(f"{'run':24s} {'reviews':>7s} {'correct':>7s} {'last end s':>10s} {'per minute':>10s}")
    for name, (started, rows) in loaded.items():
        name = Path(name).name[:24]
        if len(rows) < n:
            print(f"{name:24s} only {len(rows)} reviews")
            continue
        end = (datetime.fromisoformat(rows[n - 1]["at"]) - started).total_seconds()
        print(f"{name:24s} {n:7d} {sum(r['correct'] for r in rows[:n]):7d} {end:10.1f} {60 * n / end:10.2f}")
    print(f"\n{'stage (median / mean s)':24s}" + "".join(f"{Path(name).name[:18]:>20s}" for name in loaded))
    for stage in STAGES:
        cells = []
        for _, rows in loaded.values():
            v = [r["stage_seconds"][stage] for r in rows[:n] if stage in r["stage_seconds"]]
            cells.append(f"{statistics.median(v):8.2f} / {statistics.mean(v):6.2f}" if v else f"{'-':>17s}")
        print(f"{stage:24s}" + "".join(f"{c:>20s}" for c in cells))


if __name__ == "__main__":
    main()
