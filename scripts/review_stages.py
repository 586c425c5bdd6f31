"""Where a judged review's time goes, stage by stage, for a few (problem, kernel) pairs reviewed back to back on
this machine's GPU: each pair is reviewed once untimed (its build, first-call compiles) and then `--repeat` times.

    python scripts/review_stages.py --pair PROBLEM KERNEL [--pair ...] [--repeat 2] [--rules kernelbench]

Prints one row per review: wall, the reference runner, the candidate's stages, the judge's trials, compare and
batch (seconds), the verdict and speedup.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelskill.candidate import read_candidate  # noqa: E402
from kernelskill.review.reviewer import review  # noqa: E402
from kernelskill.settings import ReviewSettings  # noqa: E402

COLUMNS = ("reference", "start", "verify", "time", "judge_trials", "judge_compare", "judge_batch", "judge_kill",
           "judge_reference_batch", "reference_kill", "unnamed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", nargs=2, action="append", required=True, metavar=("PROBLEM", "KERNEL"))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rules", default="kernelbench")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    settings = ReviewSettings(device=args.device, rules=args.rules)
    print(f"{'kernel':<40} {'wall':>6} " + " ".join(f"{c[-9:]:>9}" for c in COLUMNS) + "  verdict")
    for problem, kernel in args.pair:
        candidate = read_candidate(Path(kernel), None)
        for i in range(args.repeat + 1):
            start = time.perf_counter()
            result = review(Path(problem), candidate, settings)
            wall = time.perf_counter() - start
            if i == 0:
                continue  # untimed: the build and first-call compiles
            s = dict(result.stage_seconds)
            s["unnamed"] = wall - sum(s.get(c, 0) for c in COLUMNS[:-1]) - s.get("judge_reserve", 0)
            verdict = f"correct {result.speedup:.2f}x" if result.correct else f"{result.error_kind}"
            print(f"{Path(kernel).stem[:40]:<40} {wall:6.2f} " + " ".join(f"{s.get(c, 0):9.2f}" for c in COLUMNS)
                  + f"  {verdict}", flush=True)


if __name__ == "__main__":
    main()
