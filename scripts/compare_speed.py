"""The output comparison's cost, side by side in one run: every element through float64 (how compare.py compared
before) and the float32 pass first (how it compares now), on one output of 64M float32 elements, twice each.

    PYTHONPATH=src python3 scripts/compare_speed.py [--elements 67108864]

Runs on the CPU (the judging side compares on its CPU). Prints one line a run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from kernelskill.review import compare  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=64 * 1024 * 1024)
    args = parser.parse_args()
    r = torch.randn(args.elements)
    c = r + 1e-4 * torch.randn_like(r)
    strict = (1e-4, 1e-4)

    def float64_only():
        out = compare._Values(first=[])
        for s in range(0, r.numel(), compare.CHUNK):
            compare._exact(out, c[s:s + compare.CHUNK], r[s:s + compare.CHUNK], r.dtype, 1e-2, 1e-2, strict, 5, s,
                           None)
        return out

    def float32_first():
        return compare._compare_values(r, c, 1e-2, 1e-2, strict=strict)

    for name, fn in [("float64 only", float64_only), ("float32 first", float32_first)] * 2:
        start = time.perf_counter()
        v = fn()
        print(f"{name:14} {time.perf_counter() - start:6.2f} s  bad={v.bad} strict_bad={v.strict_bad} "
              f"max abs={v.abs_err:.3e}", flush=True)


if __name__ == "__main__":
    main()
