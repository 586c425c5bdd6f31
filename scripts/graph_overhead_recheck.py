"""Session 17's question, asked of recorded spread rows: had the judge subtracted what a graph-replayed reference
batch takes beyond its events' time (judge_time.bound_timing, `graph_ref`), which reviews' candidate events would
its clock have confirmed, and at what figure?

    python scripts/graph_overhead_recheck.py docs/h200/timing/s17/ab_on_before_fix.jsonl.gz

Reads each row's judge_batch (both sides' `calls` parts by the judge's clock, the calls, the candidate's claimed
events) and the reference's GPU time per call from its host_bound flag (the candidate runner's figure, which the
rows keep; the judge uses the reference runner's, within a few percent of it). Prints one line a review and, a task,
the spread of the figures confirmed ones would have had (the events' ratio)."""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import defaultdict

from kernelskill.review.judge import OVERHEAD_CAP_S
from kernelskill.review.judge_time import WALL_ABS_S, WALL_TOL

FLAG = re.compile(r"reference's host takes [\d.]+ us to launch a call that runs ([\d.]+) us")


def main(path: str) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    figures: dict[str, list[float]] = defaultdict(list)
    with opener(path, "rt") as rows:
        for line in rows:
            row = json.loads(line)
            batch, found = row.get("judge_batch"), None
            for flag in row.get("flags", []):
                found = FLAG.search(flag) or found
            if not batch or not found:
                print(f"{row['task'][:24]:24} {row['condition']:5} no batch or no reference GPU time")
                continue
            graphs = batch.get("graphs") or {}
            ref_gpu_s, n = float(found.group(1)) * 1e-6, batch["calls"]
            replayed = graphs.get("reference") is True
            overhead = min(OVERHEAD_CAP_S, max(0.0, batch["reference_s"]["calls"] - batch["reference_calls"] * ref_gpu_s)) \
                if replayed else 0.0
            pace = (batch["candidate_s"]["calls"] - overhead) / n
            claim = batch["claimed_us"] * 1e-6
            confirmed = pace <= claim * (1 + WALL_TOL) + WALL_ABS_S / n
            figure = ref_gpu_s / claim if confirmed else None
            if figure:
                figures[row["task"]].append(figure)
            print(f"{row['task'][:24]:24} {row['condition']:5} graphs {graphs} pace {pace * 1e6:6.2f} us, claim "
                  f"{claim * 1e6:6.2f} us: {'confirmed, %.3fx' % figure if figure else 'unconfirmed'} "
                  f"(recorded: {'confirmed' if batch['confirmed'] else 'unconfirmed'}, {row['speedup']:.3f}x)")
    print()
    for task, values in figures.items():
        print(f"{task[:32]:32} {len(values)} confirmed, max/min {max(values) / min(values):.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
