"""A quick look at the zygote on a GPU: three reviews of one Triton candidate in a row (the first starts the zygote),
each with its wall time, start-up and sandbox; then the zygotes' own logs (which modules they preloaded).

    PYTHONPATH=src python3 scripts/zygote_smoke.py [--device cuda]
"""

from __future__ import annotations

import argparse
import glob
import os
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
    p.add_argument("--sandbox", default="on", help="comma list of KERNELSKILL_SANDBOX values, one review each")
    args = p.parse_args()
    from kernelskill.settings import Sandbox

    problem = ROOT / "tests/data/problems/p01_pointwise_gelu_chain.py"
    candidate = read_candidate(ROOT / "tests/data/candidates/p01_pointwise_gelu_chain/triton_ok.py")
    for spec in args.sandbox.split(";"):
        os.environ["KERNELSKILL_SANDBOX"] = spec
        for i in range(2):
            start = time.perf_counter()
            try:
                r = review(problem, candidate, ReviewSettings(device=args.device, sandbox=Sandbox.from_env()),
                           log_dir=Path(tempfile.mkdtemp()))
            except Exception as exc:  # noqa: BLE001 - a script: say it and go on
                print(f"[{spec}] review {i}: {type(exc).__name__}: {exc}", flush=True)
                continue
            print(f"[{spec}] review {i}: correct={r.correct} speedup={r.speedup} wall={time.perf_counter() - start:.2f}s"
                  f" start={r.stage_seconds.get('start')} error={(r.error or '')[:300]!r}", flush=True)
            if r.log_path and not r.correct:
                print("  log tail:", Path(r.log_path).read_text(errors="replace")[-800:])
        print(f"[{spec}] sandbox:", describe({k: v.model_dump(exclude_none=True) for k, v in r.sandbox.items()}))
    for log in glob.glob(f"{tempfile.gettempdir()}/kernelskill-zygote-*/zygote.log"):
        print(f"--- {log}\n{Path(log).read_text(errors='replace')[-1500:]}")


if __name__ == "__main__":
    main()
