"""A quick look at the zygote on a GPU: three reviews of one Triton candidate in a row (the first starts the zygote),
each with its wall time, start-up and sandbox; then the zygotes' own logs (which modules they preloaded).

    PYTHONPATH=src python3 scripts/zygote_smoke.py [--device cuda]
"""

from __future__ import annotations

import argparse
import glob
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main() -> None:
    from kernelskill.candidate import read_candidate
    from kernelskill.review.confine import describe
    from kernelskill.review.reviewer import review
    from kernelskill.settings import ReviewSettings

    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    problem = ROOT / "tests/data/problems/p01_pointwise_gelu_chain.py"
    candidate = read_candidate(ROOT / "tests/data/candidates/p01_pointwise_gelu_chain/triton_ok.py")
    for i in range(3):
        start = time.perf_counter()
        r = review(problem, candidate, ReviewSettings(device=args.device), log_dir=Path(tempfile.mkdtemp()))
        print(f"review {i}: correct={r.correct} speedup={r.speedup} wall={time.perf_counter() - start:.2f}s "
              f"start={r.stage_seconds.get('start')} error={(r.error or '')[:400]!r}", flush=True)
    print("sandbox:", describe({k: v.model_dump(exclude_none=True) for k, v in r.sandbox.items()}))
    for log in glob.glob(f"{tempfile.gettempdir()}/kernelskill-zygote-*/zygote.log"):
        print(f"--- {log}\n{Path(log).read_text(errors='replace')[-1500:]}")


if __name__ == "__main__":
    main()
