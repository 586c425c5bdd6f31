"""The judge's price on a corpus: warm reviews with the verdict decided outside the runner (review/judge.py) and
with the runner's own report (Guards(judge=False), as before the trust boundary), side by side in one run.

    python scripts/price_check.py --corpus .devdata/corpus --count 24 --out OUT [--budget 300] [--jobs 8]

Takes `--count` tasks of the corpus spread over its levels (every n-th kernel of levels 1-3), builds them all
first (`prebuild`, `--jobs` at once: the reviews then find their builds cached, so what is compared is the warm
review), then reviews each task with the judge and without, alternating which goes first, with spare runners kept
starting as an evaluator keeps them. Prints per task the verdicts, speedups and wall seconds of both, then reviews
per minute of each and the median wall ratio; writes OUT/price.jsonl and OUT/price.txt.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelskill.candidate import parse_candidate  # noqa: E402
from kernelskill.llm.corpus import read_index  # noqa: E402
from kernelskill.review.reviewer import prebuild, prepare_builds, review  # noqa: E402
from kernelskill.review.sandbox import POOL  # noqa: E402
from kernelskill.settings import Guards, ReviewSettings  # noqa: E402


def pick(corpus: Path, count: int) -> list[dict]:
    kernels = [e.model_dump() for e in read_index(corpus).entries if e.kernel]
    step = max(1, len(kernels) // count)
    return kernels[::step][:count]


def settings_for(judge: bool) -> ReviewSettings:
    return ReviewSettings(device="cuda", rules="kernelbench", guards=Guards(judge=judge))


def one(corpus: Path, entry: dict, judge: bool, log_dir: Path) -> dict:
    path = corpus / entry["kernel"]
    start = time.perf_counter()
    try:
        r = review(corpus / entry["problem"], parse_candidate(path.read_text(), path), settings_for(judge),
                   log_dir=log_dir)
        row = {"correct": r.correct, "error_kind": r.error_kind, "speedup": r.speedup,
               "stage_seconds": r.stage_seconds,
               "judge_batch": r.judge_batch.model_dump(mode="json") if r.judge_batch else None}
    except Exception as exc:  # noqa: BLE001 - a row that says what broke
        row = {"correct": False, "error_kind": "harness", "error": f"{type(exc).__name__}: {exc}", "speedup": None}
    row["wall_s"] = round(time.perf_counter() - start, 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--count", type=int, default=24)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--budget", type=float, default=300, help="seconds; no task starts after it")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    began = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = pick(args.corpus, args.count)
    prepare_builds().join()  # the precompiled headers, once per machine, before anything is built or timed
    print(f"precompiled headers ready after {time.monotonic() - began:.0f} s", flush=True)

    def build(entry: dict) -> float:
        path = args.corpus / entry["kernel"]
        start = time.perf_counter()
        prebuild(args.corpus / entry["problem"], parse_candidate(path.read_text(), path), settings_for(True),
                 log_dir=args.out / "logs" / f"L{entry['level']}_{entry['name']}" / "build")
        return time.perf_counter() - start

    with ThreadPoolExecutor(args.jobs) as pool:
        built = list(pool.map(build, tasks))
    print(f"{len(tasks)} tasks built in {time.monotonic() - began:.0f} s (median build {statistics.median(built):.1f} s "
          f"at {args.jobs} at once)", flush=True)
    POOL.spares = 2
    rows = []
    out = open(args.out / "price.jsonl", "a")
    for i, entry in enumerate(tasks):
        if time.monotonic() - began > args.budget:
            print(f"budget of {args.budget:.0f} s spent after {i} tasks", flush=True)
            break
        name = f"L{entry['level']}/{entry['name']}"
        row = {"task": name}
        for judge in ((True, False) if i % 2 == 0 else (False, True)):
            row["on" if judge else "off"] = one(args.corpus, entry, judge, args.out / "logs" / name.replace("/", "_")
                                                / ("on" if judge else "off"))
        rows.append(row)
        out.write(json.dumps(row) + "\n")
        out.flush()
        on, off = row["on"], row["off"]
        print(f"{name[:40]:<40} judge {str(on['correct']):<5} {on['speedup'] or 0:7.2f}x {on['wall_s']:6.2f}s | "
              f"runner only {str(off['correct']):<5} {off['speedup'] or 0:7.2f}x {off['wall_s']:6.2f}s "
              f"{on.get('error_kind') or ''}", flush=True)
    POOL.spares = 0
    if not rows:
        return
    on_s, off_s = sum(r["on"]["wall_s"] for r in rows), sum(r["off"]["wall_s"] for r in rows)
    agree = sum(r["on"]["correct"] == r["off"]["correct"] for r in rows)
    lines = [f"{len(rows)} warm reviews each way: judge {60 * len(rows) / on_s:.1f} reviews/min "
             f"({on_s:.0f} s), runner only {60 * len(rows) / off_s:.1f} reviews/min ({off_s:.0f} s); median wall "
             f"ratio judge/runner-only {statistics.median(r['on']['wall_s'] / r['off']['wall_s'] for r in rows):.2f}x; "
             f"median wall judge {statistics.median(r['on']['wall_s'] for r in rows):.2f} s, runner only "
             f"{statistics.median(r['off']['wall_s'] for r in rows):.2f} s; same verdict on {agree} of {len(rows)}"]
    for r in rows:
        if r["on"]["correct"] != r["off"]["correct"]:
            lines.append(f"  differs: {r['task']}: judge {r['on'].get('error_kind')} "
                         f"{(r['on'].get('error') or '')[:120]}")
    stages = sorted({k for r in rows for k in (r["on"].get("stage_seconds") or {})})
    lines.append("judge on, median seconds by stage (mean): " + ", ".join(
        f"{k} {statistics.median(v):.3f} ({statistics.mean(v):.3f})" for k in stages
        if (v := [r["on"]["stage_seconds"][k] for r in rows if k in (r["on"].get("stage_seconds") or {})])))
    text = "\n".join(lines)
    print(text)
    (args.out / "price.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
