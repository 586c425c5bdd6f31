"""Every corpus kernel through a prebuild on this machine's CPU, with the builds stubbed: no GPU time, no compiler.

    python scripts/prebuild_dry_run.py --corpus CORPUS [--arch 9.0a] [--jobs 2] [--json OUT.json]

What it tells before a GPU session: how many kernels that call `load_inline` have their builds reached by the
prebuild (the rest are built during their review, on the GPU's clock), which prebuilds stop and why, and whether
any prebuild crashes or hangs. Each kernel gets the prebuild a bench gives it (a worker with no GPU visible,
`mode="build"`, the GPU's arch), except that `build_inline` returns at once: a `sitecustomize` module written to a
temporary folder replaces it in the worker before anything else is imported.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUB = """import os
if os.environ.get("KERNELSKILL_DRY_RUN_BUILDS"):
    from kernelskill.review.cuda import inline
    from kernelskill.review.cuda.build import BuiltExtension

    def _built(**kwargs):
        return BuiltExtension(kwargs["name"], kwargs["name"], "", None, False, 0.0)

    inline.build_inline = _built
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, type=Path)
    p.add_argument("--arch", default="9.0a", help="the GPU's arch as its TORCH_CUDA_ARCH_LIST names it")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from kernelskill.candidate import parse_candidate
    from kernelskill.llm.corpus import read_index
    from kernelskill.problem import read_problem
    from kernelskill.review.reviewer import _request
    from kernelskill.review.sandbox import clean_environment, run_worker
    from kernelskill.settings import ReviewSettings

    entries = [e for e in read_index(args.corpus).entries if e.kernel and e.problem]
    stub_dir = Path(tempfile.mkdtemp(prefix="kernelskill-dry-run-"))
    (stub_dir / "sitecustomize.py").write_text(STUB)
    env = clean_environment({"CUDA_VISIBLE_DEVICES": "", "KERNELSKILL_DRY_RUN_BUILDS": "1",
                             "PYTHONPATH": f"{ROOT / 'src'}:{stub_dir}"})
    settings = ReviewSettings(device="cpu")

    def one(e) -> dict:
        kernel = args.corpus / e.kernel
        candidate = parse_candidate(kernel.read_text(encoding="utf-8"), kernel)
        request = _request(read_problem(args.corpus / e.problem), candidate, settings, "cpu", "cuda", mode="build",
                           arch=args.arch)
        start = time.monotonic()
        outcome = run_worker(request, settings.timeouts.model_dump(), stub_dir / f"L{e.level}_{e.index}.log", env,
                             reuse=True)
        results = outcome.results.model_dump(exclude_unset=True) if outcome.results is not None else {}
        return {"task": f"L{e.level}/{e.name}", "seconds": round(time.monotonic() - start, 1),
                "calls_load_inline": "load_inline" in candidate.source,
                "builds": [b.get("name") for b in results.get("prebuild") or []],
                "stopped": results.get("prebuild_stopped"),
                "verdict": outcome.verdict.error if outcome.verdict else None, "timed_out": outcome.timed_out}

    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one, entries))
    inline = [r for r in rows if r["calls_load_inline"]]
    print(f"{len(rows)} kernels; {len(inline)} call load_inline, the prebuild reaches the builds of "
          f"{sum(bool(r['builds']) for r in inline)}; {sum(bool(r['stopped']) for r in rows)} prebuilds stopped "
          f"early, {sum(bool(r['verdict']) for r in rows)} ended with a verdict, "
          f"{sum(r['timed_out'] for r in rows)} timed out; "
          f"slowest {max((r['seconds'] for r in rows), default=0):.1f} s")
    for r in rows:
        if r["verdict"] or r["timed_out"] or (r["stopped"] and r["calls_load_inline"]) or (
                r["calls_load_inline"] and not r["builds"]):
            why = r["verdict"] or r["stopped"] or ("timed out" if r["timed_out"] else "no build reached (lazy, or "
                                                  "behind a check the meta device answers no to)")
            print(f"  {r['task']}: {why.strip().splitlines()[-1][:160]}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
