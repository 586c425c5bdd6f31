"""How hard the judge's batches tested the runners' claimed times: for each judged review of a bench run, the fastest
event time the batch's walls would still have confirmed, against the one the runner claimed. A lying runner may also
move work out of its calls into its prepare and commit, as far as they are still excused (judge.PHASE_TOL and
PHASE_ABS_S over the reference's): that room counts too.

    python scripts/batch_resolution.py RUN_OR_REVIEWS [--factor 1.5]

RUN_OR_REVIEWS is a bench run folder (its run.db) or a reviews file with a `judge_batch` per line (JSON Lines, as in
docs/h200/build_breakdown/2026-12-06/reviews.jsonl). A confirmed claim above `--factor` times the fastest confirmable
time is one the judge could not tell from a lie that much smaller (judge.UNRESOLVED_FACTOR, flag timing_unresolved);
where the fastest is 0, any claim would have passed. Older rows, written before batches recorded
`fastest_confirmable_us`, get it from their pace, call count and the judge's tolerances, the same test solved for the
claim; `--slack-ms` tests every row with another latency allowance (session 9's rows were judged with 2 ms). A row
from before the batch's input file was masked and its outputs digested (no `digests_checked`) counts what its
prepare and commit were excused as room its calls' work could have moved to; a later row does not.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelskill.review.judge import UNRESOLVED_FACTOR, WALL_ABS_S, fastest_confirmable  # noqa: E402


def batches(path: Path) -> list[tuple[str, dict]]:
    if path.is_dir():
        with sqlite3.connect(f"file:{path / 'run.db'}?mode=ro", uri=True) as db:
            rows = [json.loads(r[0] or "{}") for r in db.execute("SELECT result_json FROM reviews")]
        return [(Path(r.get("problem", "?")).stem, r["judge_batch"]) for r in rows if r.get("judge_batch")]
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(r.get("task", "?"), r["judge_batch"]) for r in rows if r.get("judge_batch")]


def fastest_us(batch: dict, slack_s: float | None = None) -> float:
    """The fastest claim the batch would have confirmed: as recorded, or (older rows, or another `slack_s` than the
    judge's WALL_ABS_S) solved from its pace."""
    if "fastest_confirmable_us" in batch and slack_s is None:
        return batch["fastest_confirmable_us"]
    fastest_s, _ = fastest_confirmable(batch["candidate_pace_us"] / 1e6, batch["calls"], batch["reference_s"],
                                       batch["candidate_s"], batch["calls"] / batch["reference_calls"],
                                       WALL_ABS_S if slack_s is None else slack_s,
                                       movable=not batch.get("digests_checked"))
    return fastest_s * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--factor", type=float, default=UNRESOLVED_FACTOR)
    parser.add_argument("--slack-ms", type=float, default=None,
                        help=f"the latency allowance per batch to test with (default: the judge's, "
                             f"{WALL_ABS_S * 1e3:g} ms; what a row recorded is then recomputed)")
    args = parser.parse_args()
    confirmed = [(task, b) for task, b in batches(args.run) if b.get("confirmed")]
    rows = []
    for task, b in confirmed:
        fastest = fastest_us(b, None if args.slack_ms is None else args.slack_ms / 1e3)
        rows.append((b["claimed_us"] / fastest if fastest > 0 else float("inf"), task, b, fastest))
    rows.sort(key=lambda r: -r[0])
    print(f"{'task':<44} {'calls':>6} {'calls ms':>9} {'claimed us':>11} {'pace us':>9} {'fastest us':>11} {'lie':>7}")
    for ratio, task, b, fastest in rows:
        calls_ms = b.get("candidate_s", {}).get("calls", 0.0) * 1e3
        lie = "any" if ratio == float("inf") else f"{ratio:.2f}x"
        print(f"{task[:44]:<44} {b['calls']:>6} {calls_ms:>9.2f} {b['claimed_us']:>11.1f} "
              f"{b['candidate_pace_us']:>9.1f} {fastest:>11.1f} {lie:>7}")
    unresolved = sum(r[0] > args.factor for r in rows)
    unbounded = sum(r[0] == float("inf") for r in rows)
    print(f"{len(rows)} confirmed timings; {unresolved} would have confirmed a claim {args.factor:g}x smaller as well "
          f"(timing_unresolved), {unbounded} any claim at all (bounded only by the speed-of-light floor)")


if __name__ == "__main__":
    main()
