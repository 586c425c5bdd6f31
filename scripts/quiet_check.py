"""Host-bound kernels judged while a bench builds the next candidates: the builds held still during the judge's
batches (review/quiet.py) or left running, side by side in one run, interleaved review by review.

    python scripts/quiet_check.py --corpus .devdata/corpus --tasks 19,20,21,22,24,27 --repeats 4 --load 6 \
        --out OUT [--budget 400]

1. Each task (level 1 of a corpus from `kernelskill corpus import`) is reviewed once with nothing else running: its
   build lands in the cache, and its figure there is the "idle" column.
2. `--load` threads then prebuild other CUDA kernels of the corpus without end, each made a cache miss by a comment
   put into its CUDA source (so each is a real cold build through `prebuild`, as a bench's next candidates are).
3. Each task is reviewed `--repeats` times with the quiet window on and as many with it off
   (KERNELSKILL_QUIET_BUILDS), alternating which goes first, while the load runs.

Prints, per task, the speedups (min / median / max, and max/min) idle, quiet on and quiet off, with how many builds
were in flight; writes every review's row to OUT/quiet.jsonl and the table to OUT/quiet.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelskill.candidate import parse_candidate  # noqa: E402
from kernelskill.llm.corpus import read_index  # noqa: E402
from kernelskill.review.quiet import BUILDS  # noqa: E402
from kernelskill.review.reviewer import prebuild, review  # noqa: E402
from kernelskill.settings import ReviewSettings  # noqa: E402


def entries(corpus: Path) -> dict[int, dict]:
    return {e.index: e.model_dump() for e in read_index(corpus).entries if e.level == "1" and e.kernel}


def one_review(corpus: Path, entry: dict, settings: ReviewSettings, log_dir: Path) -> dict:
    path = corpus / entry["kernel"]
    start = time.perf_counter()
    result = review(corpus / entry["problem"], parse_candidate(path.read_text(), path), settings, log_dir=log_dir)
    batch = result.judge_batch
    return {"correct": result.correct, "error_kind": result.error_kind, "speedup": result.speedup,
            "flags": [f.split(":")[0] for f in result.flags], "wall_s": round(time.perf_counter() - start, 2),
            "reference_pace_us": batch.reference_pace_us if batch else None,
            "candidate_pace_us": batch.candidate_pace_us if batch else None,
            "confirmed": batch.confirmed if batch else None,
            "runner_calls_s": batch.runner_calls_s if batch else None,
            "walls": {"reference": batch.reference_s, "candidate": batch.candidate_s} if batch else None}


class Load:
    """Threads prebuilding cold copies of other kernels until stopped."""

    def __init__(self, corpus: Path, pool: list[dict], threads: int, settings: ReviewSettings, log_dir: Path):
        self.corpus, self.pool, self.settings, self.log_dir = corpus, pool, settings, log_dir
        self.stop = threading.Event()
        self.built = self.failed = 0
        self.threads = [threading.Thread(target=self.loop, args=(i,), daemon=True) for i in range(threads)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def loop(self, i: int) -> None:
        n = i
        while not self.stop.is_set():
            entry = self.pool[n % len(self.pool)]
            n += len(self.threads)
            path = self.corpus / entry["kernel"]
            source = path.read_text().replace("__global__", f"/* load {uuid.uuid4().hex} */ __global__", 1)
            try:
                done = prebuild(self.corpus / entry["problem"], parse_candidate(source, path), self.settings,
                                log_dir=self.log_dir / f"load-{i}")
                self.built += done is not None and done.result is None
                self.failed += done is not None and done.result is not None
            except Exception as exc:  # noqa: BLE001 - the load goes on; the count says how much of it failed
                self.failed += 1
                print(f"load {i}: {type(exc).__name__}: {exc}", flush=True)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=600)


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    lo, med, hi = min(values), statistics.median(values), max(values)
    return f"{lo:.2f}/{med:.2f}/{hi:.2f} ({hi / lo:.2f})"


def table(rows: list[dict], tasks: list[dict]) -> str:
    lines = [f"{'task':<24} {'idle: min/med/max (max/min)':>26} {'load, quiet on':>26} {'load, quiet off':>30} "
             "builds on/off"]
    for entry in tasks:
        mine = [r for r in rows if r["task"] == entry["name"] and r["correct"] and r["speedup"]]
        idle = [r["speedup"] for r in mine if r["mode"] == "idle"]
        on = [r for r in mine if r["mode"] == "on"]
        off = [r for r in mine if r["mode"] == "off"]
        lines.append(f"{entry['name'][:24]:<24} {spread(idle):>26} {spread([r['speedup'] for r in on]):>26} "
                     f"{spread([r['speedup'] for r in off]):>30} "
                     f"{statistics.mean([r['builds'] for r in on] or [0]):.1f}/"
                     f"{statistics.mean([r['builds'] for r in off] or [0]):.1f}")
    for mode in ("idle", "on", "off"):
        ratios = []
        for entry in tasks:
            values = [r["speedup"] for r in rows if r["task"] == entry["name"] and r["mode"] == mode and r["correct"]
                      and r["speedup"]]
            if len(values) > 1:
                ratios.append(max(values) / min(values))
        if ratios:
            lines.append(f"{mode}: max/min per task, median {statistics.median(ratios):.3f}, worst "
                         f"{max(ratios):.3f}, {sum(r <= 1.05 for r in ratios)} of {len(ratios)} within 1.05")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--tasks", default="19,20,21,22,24,27", help="level-1 task numbers (host-bound ones)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--idle-repeats", type=int, default=1, help="reviews of each task with no load")
    parser.add_argument("--load", type=int, default=6, help="prebuilds kept running at once")
    parser.add_argument("--budget", type=float, default=400, help="seconds; no review starts after it")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    began = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    known = entries(args.corpus)
    tasks = [known[int(t)] for t in args.tasks.split(",") if int(t) in known]
    pool = [e for i, e in sorted(known.items()) if i not in {t["index"] for t in tasks}
            and "__global__" in (args.corpus / e["kernel"]).read_text()]
    settings = ReviewSettings(device="cuda", rules="kernelbench")
    rows: list[dict] = []
    out = open(args.out / "quiet.jsonl", "a")

    def record(entry: dict, mode: str, builds: int) -> None:
        os.environ["KERNELSKILL_QUIET_BUILDS"] = "0" if mode == "off" else "1"
        windows = BUILDS.windows
        row = {"task": entry["name"], "mode": mode, "builds": builds,
               **one_review(args.corpus, entry, settings, args.out / "logs" / entry["name"]),
               "windows": BUILDS.windows - windows}
        rows.append(row)
        out.write(json.dumps(row) + "\n")
        out.flush()
        print(f"{entry['name'][:24]:<24} {mode:<4} builds {builds} speedup {row['speedup'] or 0:.3f} "
              f"paces {row['reference_pace_us']}/{row['candidate_pace_us']} us {row['wall_s']} s; calls part, "
              f"judge/runner says: ref {(row['walls'] or {}).get('reference', {}).get('calls')}/"
              f"{(row['runner_calls_s'] or {}).get('reference')} cand {(row['walls'] or {}).get('candidate', {}).get('calls')}/"
              f"{(row['runner_calls_s'] or {}).get('candidate')}", flush=True)

    def build(entry: dict) -> None:  # the tasks' own builds, in parallel, before anything is timed
        path = args.corpus / entry["kernel"]
        prebuild(args.corpus / entry["problem"], parse_candidate(path.read_text(), path), settings,
                 log_dir=args.out / "logs" / entry["name"] / "build")

    with ThreadPoolExecutor(len(tasks)) as builders:
        list(builders.map(build, tasks))
    print(f"tasks built in {time.monotonic() - began:.0f} s", flush=True)
    for _ in range(args.idle_repeats):
        for entry in tasks:
            record(entry, "idle", 0)
    load = Load(args.corpus, pool, args.load, settings, args.out / "logs")
    load.start()
    if args.load and args.repeats:
        time.sleep(20)  # the load under way: compilers running
    try:
        for r in range(args.repeats):
            for entry in tasks:
                for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                    if time.monotonic() - began > args.budget:
                        raise TimeoutError
                    record(entry, mode, len(BUILDS._pids))
    except TimeoutError:
        print(f"budget of {args.budget:.0f} s spent", flush=True)
    finally:
        os.environ["KERNELSKILL_QUIET_BUILDS"] = "1"
        load.close()
    text = table(rows, tasks) + f"\nload: {load.built} builds finished, {load.failed} failed; " \
                                f"{time.monotonic() - began:.0f} s in all"
    print(text)
    (args.out / "quiet.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
