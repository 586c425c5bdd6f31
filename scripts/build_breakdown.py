"""Where a cold CUDA build's time goes, per step, and how builds scale when several run at once.

Run on a machine with nvcc (the GPU host for "run" mode) from the repository root:

    python scripts/build_breakdown.py --out $OUT/breakdown                  # 1, 2, 4, 8, 12 builds at once
    python scripts/build_breakdown.py --levels 1,4 --plain 2 --out /tmp/bd  # fewer levels; 2 plain load_inline
    python scripts/build_breakdown.py --mode check --levels 1 --out /tmp/bd # no GPU: compile only (CPU machines)

Inputs are real single-kernel `load_inline` candidates kept in the repository: the public LLM-written kernels in
tests/data/public and tests/data/decision/*/*/candidate.py (provenance in their READMEs) and our own
tests/data/candidates/*/cuda_*.py; a candidate with one `load_inline(` call and CUDA sources. Each build runs the
candidate file in a fresh Python process, as a review worker does, with kernelskill's stand-in for load_inline
(`review.cuda.inline`, "run": build and import; "check": compile only). Every level gets a new, empty
KERNELSKILL_CACHE (cache-cold) that shares only the precompiled headers (<torch/extension.h>, the bindings', the split
host parts'), built once first and reported apart (a one-time cost per machine and flag set); the builds of one level share that cache, as the reviews of one
run do. Level k builds the first k kernels, all started at once; level 1 builds the first --serial kernels (default
4) one after another, each in a fresh cache: the median cold build.

Per build, the steps the builder records (`BuiltExtension.steps`): start (python + import torch), pch (a header
built during the build), cpp (main.cpp against the header), the CUDA unit's nvcc steps (host-E + cudafe++: the host
front end; device-E + cicc + ptxas + fatbinary: the device pass, beside the host one; host-compile: g++ over the
host code cudafe++ wrote; for a split unit, the device part's nvcc steps beside split-host: the host compiler over
the host part, and split-join: the two objects made one; narrowed: a variant that failed first), link, import, wait (on another
process's lock), and total (the load_inline call).
--plain N also builds the first N kernels with torch's own load_inline, one at a time, for the ratio (against
level 1's builds of the same kernels).

Prints the tables; writes breakdown.json (and breakdown.txt, the tables) under --out, after every level.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

# A fresh interpreter per build, as a review worker: import torch, then run the candidate's module; its load_inline
# (imported from torch.utils.cpp_extension) is kernelskill's stand-in, or torch's own for "plain".
CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
spec = json.loads(sys.argv[1])
import torch
import torch.utils.cpp_extension as cpp_extension
started = time.perf_counter() - t0
if spec["path"] != "plain":
    from kernelskill.review.cuda import inline
    inline.install(spec["mode"], spec["arch"])
source = open(spec["file"]).read()
t1 = time.perf_counter()
exec(compile(source, spec["file"], "exec"), {"__name__": "ks_candidate", "__file__": spec["file"]})
total = time.perf_counter() - t1
result = {"start": round(started, 3), "total": round(total, 3)}
if spec["path"] != "plain":
    if not inline.BUILDS:
        raise SystemExit("the candidate did not call load_inline when its module ran")
    b = inline.BUILDS[-1]
    result.update(steps=b.steps, notes=b.notes, pch_used=b.pch_used, variant=b.cuda_variant, cache_hit=b.cache_hit,
                  seconds=b.seconds)
print("RESULT " + json.dumps(result))
"""

PCH_CHILD = r"""
import json, sys
import torch
from kernelskill.review.cuda.pch import prepare_pch
# the arch the builds will use: --arch, else the GPU's as torch names it (the stand-in's default), else check's 9.0
arch = sys.argv[1] or ("%d.%d+PTX" % torch.cuda.get_device_capability() if torch.cuda.is_available() else "9.0")
print("RESULT " + json.dumps({"seconds": prepare_pch(with_cuda=True, arch=arch)}))
"""

STEPS = ["start", "pch", "cpp", "cuda", "cuda.host-E", "cuda.cudafe++", "cuda.device-E", "cuda.cicc", "cuda.ptxas",
         "cuda.fatbinary", "cuda.host-compile", "cuda.split-host", "cuda.split-pch", "cuda.split-join", "cuda.narrowed",
         "link", "import", "wait", "total"]


def candidates() -> list[Path]:
    """Single-kernel load_inline candidates with CUDA sources, public ones first, in a fixed order."""
    files = (sorted((DATA / "public").glob("*/*.py")) + sorted((DATA / "decision").glob("*/*/candidate.py"))
             + sorted((DATA / "candidates").glob("*/cuda_*.py")))
    out = []
    for path in files:
        text = path.read_text()
        # called once, at module level (a call inside forward() builds only when the model runs)
        # (KernelBench's adversarial kernels, `unit_test_*`, are attacks for the judge, not builds to time)
        if (text.count("load_inline(") == 1 and "cuda_sources" in text and "broken" not in path.parts[-2]
                and not path.name.startswith("unit_test_")
                and re.search(r"^(\w+\s*=\s*)?(\w+\.)*load_inline\(", text, re.MULTILINE)):
            out.append(path)
    return out


def env_with(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def start_child(code: str, args: list[str], env: dict, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, timeout: float) -> dict:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"error": out[-3000:]}
    return json.loads(lines[-1][len("RESULT "):])


def fresh_cache(work: Path, pch_root: Path) -> Path:
    cache = Path(tempfile.mkdtemp(prefix="ks-cache-", dir=work))
    (cache / "cuda-build").mkdir()
    (cache / "cuda-build" / "pch").symlink_to(pch_root / "cuda-build" / "pch", target_is_directory=True)
    return cache


def level(k: int, files: list[Path], args, work: Path, pch_root: Path) -> dict:
    """k builds started at once in one fresh cache, each in its own process and working folder; level 1 builds
    --serial kernels one after another instead (each in a fresh cache), for the median of a single cold build."""
    started = time.perf_counter()
    builds = []
    batches = [[path] for path in files[:args.serial]] if k == 1 else [files[:k]]
    for batch in batches:
        env = env_with(KERNELSKILL_CACHE=str(fresh_cache(work, pch_root)))
        procs = []
        for path in batch:
            cwd = Path(tempfile.mkdtemp(prefix=f"l{k}-", dir=work))
            spec = {"path": "kernelskill", "file": str(path), "mode": args.mode, "arch": args.arch}
            procs.append((path, start_child(CHILD, [json.dumps(spec)], env, cwd)))
        for path, proc in procs:
            result = finish(proc, args.timeout)
            result["file"] = str(path.relative_to(ROOT))
            result["done_at"] = round(time.perf_counter() - started, 3)
            builds.append(result)
    return {"level": k, "wall": round(time.perf_counter() - started, 3), "builds": builds}


def plain(n: int, files: list[Path], args, work: Path) -> list[dict]:
    rows = []
    for path in files[:n]:
        ext_dir = Path(tempfile.mkdtemp(prefix="torch-ext-", dir=work))
        cwd = Path(tempfile.mkdtemp(prefix="plain-", dir=work))
        spec = {"path": "plain", "file": str(path), "mode": args.mode, "arch": args.arch}
        result = finish(start_child(CHILD, [json.dumps(spec)], env_with(TORCH_EXTENSIONS_DIR=str(ext_dir)), cwd),
                        args.timeout)
        result["file"] = str(path.relative_to(ROOT))
        rows.append(result)
    return rows


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def tables(result: dict) -> str:
    lines = [f"precompiled <torch/extension.h>, built once before the levels: {result['pch_seconds']:.1f} s", "",
             "Parallel scaling (level k: k distinct kernels started at once in a fresh cache; level 1: "
             f"{result.get('serial')} kernels one after another, each in a fresh cache):", "",
             "| builds at once | wall s | builds/min | median build s | max build s | failed |",
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for lv in result["levels"]:
        ok = [b for b in lv["builds"] if "error" not in b]
        totals = [b["total"] for b in ok]
        lines.append(f"| {lv['level']} | {lv['wall']:.1f} | {60 * len(ok) / lv['wall']:.1f} | {median(totals)} | "
                     f"{max(totals) if totals else '-'} | {len(lv['builds']) - len(ok)} |")
    lines += ["", "Median seconds per step (host and device chains of nvcc run side by side; `cuda` is the CUDA "
              "unit's wall time, `total` the load_inline call):", "",
              "| step | " + " | ".join(f"{lv['level']} at once" for lv in result["levels"]) + " |",
              "| --- |" + " ---: |" * len(result["levels"])]
    for step in STEPS:
        cells = []
        for lv in result["levels"]:
            values = [(b["total"] if step == "total" else b["start"] if step == "start" else
                       b.get("steps", {}).get(step)) for b in lv["builds"] if "error" not in b]
            present = [v for v in values if v is not None]
            cells.append("-" if not present else f"{median(present)}" + ("" if len(present) == len(values) else
                                                                        f" ({len(present)})"))
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    variants: dict[str, int] = {}
    for lv in result["levels"]:
        for b in lv["builds"]:
            key = b.get("variant") or "error"
            variants[key] = variants.get(key, 0) + 1
    retried = sum(any("compiled again" in n for n in b.get("notes", [])) for lv in result["levels"]
                  for b in lv["builds"])
    lines += ["", "CUDA unit variants built: " + ", ".join(f"{k} {v}" for k, v in sorted(variants.items()))
              + f"; builds that compiled a narrowed unit first and then again with more headers: {retried}"]
    if result.get("plain"):
        lines += ["", "Plain torch load_inline, one at a time, fresh TORCH_EXTENSIONS_DIR, against kernelskill's "
                  "builder at level 1 (the same kernels):", "", "| kernel | plain s | kernelskill s (1 at once) | ratio |",
                  "| --- | ---: | ---: | ---: |"]
        ours = {b["file"]: b.get("total") for lv in result["levels"] for b in lv["builds"] if lv["level"] == 1}
        for row in result["plain"]:
            mine = ours.get(row["file"])
            p = row.get("total")
            ratio = f"{mine / p:.2f}" if mine and p else "-"
            lines.append(f"| {row['file']} | {p if p is not None else 'error'} | {mine if mine else '-'} | {ratio} |")
    errors = [(lv["level"], b["file"], b["error"][-400:]) for lv in result["levels"] for b in lv["builds"]
              if "error" in b]
    if errors:
        lines += ["", "Errors:"] + [f"- level {k}, {f}: {e}" for k, f, e in errors]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for breakdown.json and breakdown.txt")
    parser.add_argument("--levels", default="1,2,4,8,12", help="builds at once, comma-separated (default 1,2,4,8,12)")
    parser.add_argument("--plain", type=int, default=0, help="also build the first N kernels with torch's own "
                        "load_inline, one at a time (default 0)")
    parser.add_argument("--mode", choices=["run", "check"], default=None,
                        help="run: build and import (needs a GPU; the default when one is visible); check: compile only")
    parser.add_argument("--arch", default=None, help="target arch, e.g. 9.0 (default: the GPU's; 9.0 in check mode)")
    parser.add_argument("--serial", type=int, default=4, help="kernels built one at a time at level 1 (default 4)")
    parser.add_argument("--budget", type=float, default=0, help="seconds: start no level after this (0: no limit)")
    parser.add_argument("--timeout", type=float, default=400, help="seconds per build process")
    args = parser.parse_args(argv)
    import torch

    args.mode = args.mode or ("run" if torch.cuda.is_available() else "check")
    if args.mode == "check" and args.arch is None:
        args.arch = "9.0"
    if args.mode == "run" and args.plain and not torch.cuda.is_available():
        parser.error("--plain needs a GPU")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = candidates()
    levels = [int(k) for k in args.levels.split(",")]
    if max(levels) > len(files):
        parser.error(f"only {len(files)} single-kernel candidates for {max(levels)} builds at once")
    began = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="build-breakdown-"))
    result: dict = {"command": " ".join(sys.argv), "cores": os.cpu_count(), "torch": torch.__version__,
                    "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "mode": args.mode,
                    "arch": args.arch, "serial": args.serial, "levels": [], "plain": []}

    def save() -> None:
        (out_dir / "breakdown.json").write_text(json.dumps(result, indent=1))
        (out_dir / "breakdown.txt").write_text(tables(result) + "\n")

    try:
        pch_root = work / "pch-cache"
        pch = finish(start_child(PCH_CHILD, [args.arch or ""], env_with(KERNELSKILL_CACHE=str(pch_root)), work), args.timeout)
        if "error" in pch:
            print("precompiled header failed:\n" + pch["error"], file=sys.stderr)
            return 1
        result["pch_seconds"] = pch["seconds"]
        print(f"precompiled header: {pch['seconds']:.1f} s", file=sys.stderr, flush=True)
        for k in levels:
            if args.budget and time.perf_counter() - began > args.budget:
                print(f"budget spent: level {k} not run", file=sys.stderr)
                break
            lv = level(k, files, args, work, pch_root)
            result["levels"].append(lv)
            print(f"level {k}: {lv['wall']:.1f} s", file=sys.stderr, flush=True)
            save()
            if k == 1 and args.plain:  # the ratio first: the levels after it may run out of budget
                result["plain"] = plain(args.plain, files, args, work)
                print(f"plain load_inline: {[r.get('total') for r in result['plain']]}", file=sys.stderr, flush=True)
                save()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(tables(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
