"""Session 19's question, asked of recorded spread rows: had the judge taken an unconfirmed review's reference to its
batch pace no further than the candidate (judge_time.bound_timing), what would each such review's figure have been?

    python scripts/unconfirmed_recheck.py ROWS.jsonl[.gz] OUT_DIR
    python scripts/timing_spread.py --run docs/h200/kernelbench --out OUT_DIR --table-only --protocols robust

Of an unconfirmed row, the recorded figure is the events' ratio times rf / cf, where cf is the candidate's pace over
its claimed events and rf the reference's pace over its events (at least 1); the rule since then uses min(rf, cf)
for rf. The reference's events are the row's `judge_batch.reference_events_us` where recorded, else the GPU time its
`reference_host_bound` flag gives (the candidate runner's figure, the one the review used unless it ran slow); a row
with neither is left as it was and said so. Writes OUT_DIR/timing_spread.jsonl with those figures replaced (every
other row as it was) and prints one line an unconfirmed review."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

FLAG = re.compile(r"reference's host takes [\d.]+ us to launch a call that runs ([\d.]+) us")
FIGURES = ("speedup", "speedup_median", "speedup_trimmed")


def recheck(row: dict) -> str | None:
    """Replace an unconfirmed row's figures by the capped rule's, in place; a line saying what changed (None: a
    confirmed row, or none recorded)."""
    batch = row.get("judge_batch")
    if not batch or batch.get("confirmed", True):
        return None
    events = batch.get("reference_events_us")
    if events is None:
        found = next((m for m in (FLAG.search(f) for f in row.get("flags", [])) if m), None)
        events = float(found.group(1)) if found else None
    name = f"{row['task'][:24]:24} {row['condition']:5} #{row.get('repeat', '?')}"
    if not events or not batch.get("claimed_us"):
        return f"{name} unconfirmed, no reference events recorded: left at {row['speedup_trimmed']:.3f}x"
    rf = max(1.0, batch["reference_pace_us"] / events)
    cf = batch["candidate_pace_us"] / batch["claimed_us"]
    scale = min(1.0, cf / rf)
    before = row["speedup_trimmed"]
    for key in FIGURES:
        if row.get(key) is not None:
            row[key] = row[key] * scale
    return (f"{name} reference {events:.2f} us, pace x{rf:.2f}; candidate {batch['claimed_us']:.2f} us, pace x{cf:.2f}:"
            f" {before:.3f}x -> {row['speedup_trimmed']:.3f}x")


def main(path: str, out: str) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        said = recheck(row)
        if said:
            print(said)
    Path(out).mkdir(parents=True, exist_ok=True)
    with open(Path(out) / "timing_spread.jsonl", "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
