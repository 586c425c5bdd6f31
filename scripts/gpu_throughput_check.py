"""Where a review's seconds go, measured side by side on a GPU: Triton and CUDA candidates in warm workers, cold and
cached CUDA builds, and a CUDA build on CPU cores overlapping a GPU review.

    python scripts/gpu_throughput_check.py [--problems g01,g02,g03] [--variants 3] [--skip-build-bench]

Caches start empty (a fresh KERNELSKILL_CACHE and TRITON_CACHE_DIR), so "cold" means cold. Each Triton variant
renames its kernels, so Triton compiles it afresh. "review s" is what issue 7 sets a 5 s target for: compile +
verify (5 trials) + timing (25 warm-up + 100 timed calls of reference and candidate, interleaved), without the
problem's own set-up (the load stage) and input creation (`get_inputs`). The build comparison against plain
`load_inline` runs `scripts/build_bench.py`. Writes `$OUT/throughput.json` when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
PROBLEMS = {
    "g01": ("gpu/g01_pointwise_chain_64m.py", "g01_pointwise_chain_64m"),
    "g02": ("gpu/g02_row_softmax_16384x8192.py", "g02_row_softmax_16384x8192"),
    "g03": ("gpu/g03_linear_bias_relu_4096.py", "g03_linear_bias_relu_4096"),
}


def renamed(source: str, suffix: str, pattern: str) -> str:
    """The same candidate with every name matching `pattern` renamed, so caches keyed on source miss."""
    names = sorted(set(re.findall(pattern, source)), key=len, reverse=True)
    for name in names:
        source = re.sub(rf"\b{re.escape(name)}\b", name + suffix, source)
    return source


def triton_variant(source: str, i: int) -> str:
    return source if i == 0 else renamed(source, f"_v{i}", r"@triton\.jit[^\n]*\ndef (\w+)")


def cuda_variant(source: str, i: int) -> str:
    return source if i == 0 else renamed(source, f"_v{i}", r"__global__ void (\w+)")


def review_row(label: str, result, t0: float) -> dict:
    s = result.stage_seconds
    review_s = s.get("compile", 0) + s.get("verify", 0) + s.get("time", 0) - s.get("inputs", 0)
    first_call = (result.compile.first_call_s if result.compile and result.compile.first_call_s else None)
    return {
        "case": label, "correct": result.correct, "error": (result.error or "")[:200], "speedup": result.speedup,
        "worker": "fresh" if s.get("start", 0) > 0 else "warm", "start": s.get("start", 0.0),
        "load": s.get("load"), "compile": s.get("compile"), "first_call": first_call, "verify": s.get("verify"),
        "time": s.get("time"), "inputs": s.get("inputs"), "prebuild": s.get("prebuild"),
        "review_s": round(review_s, 3), "wall": round(time.perf_counter() - t0, 3),
    }


def review_once(problem: Path, source: str, filename: Path, label: str, backend: str, reuse: bool = True) -> dict:
    from kernelskill.candidate import parse_candidate
    from kernelskill.review.reviewer import review
    from kernelskill.settings import ReviewSettings

    filename.write_text(source)
    t0 = time.perf_counter()
    settings = ReviewSettings(device="cuda", backend=backend, reuse_worker=reuse)
    result = review(problem, parse_candidate(source, filename), settings, log_dir=filename.with_suffix(""))
    return review_row(label, result, t0)


def print_rows(title: str, rows: list[dict]) -> None:
    cols = ["case", "worker", "start", "load", "compile", "first_call", "verify", "time", "inputs", "review_s",
            "prebuild", "wall", "correct", "speedup"]
    print(f"\n{title}")
    print("  ".join(f"{c:>10}" if c != "case" else f"{c:<34}" for c in cols))
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            text = "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
            cells.append(f"{text:<34}" if c == "case" else f"{text:>10}")
        print("  ".join(cells))
        if not r["correct"]:
            print(f"    error: {r['error']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", default="g01,g02,g03")
    parser.add_argument("--variants", type=int, default=3, help="Triton candidates per problem (renamed kernels)")
    parser.add_argument("--skip-build-bench", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ks-throughput-"))
    os.environ["KERNELSKILL_CACHE"] = str(work / "cache")  # cold CUDA builds
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton")  # cold Triton compiles
    sys.path.insert(0, str(ROOT / "src"))
    from kernelskill.review.reviewer import prebuild, review
    from kernelskill.review.sandbox import POOL

    report: dict = {"triton": [], "cuda": [], "overlap": {}, "build_bench": None}

    # 1. Triton candidates: the first review starts a worker, the rest reuse it
    for key in args.problems.split(","):
        rel, cdir = PROBLEMS[key]
        problem = DATA / "problems" / rel
        base = (DATA / "candidates" / cdir / "triton_ok.py").read_text()
        for i in range(args.variants):
            row = review_once(problem, triton_variant(base, i), work / f"{key}_triton_v{i}.py", f"{key} triton v{i}",
                              "triton")
            report["triton"].append(row)
            print(f"  {row['case']}: {row['worker']} review_s={row['review_s']:.2f} correct={row['correct']}", flush=True)
    print_rows("Triton candidates (review_s = compile + verify + time - input creation)", report["triton"])

    # 2. CUDA candidates. The precompiled <torch/extension.h> is built once per machine (optimize and bench start it
    # in the background); a cold build below is a source never built before, with that header in place.
    from kernelskill.review.cuda.pch import prepare_pch

    t = time.perf_counter()
    prepare_pch()
    report["pch_seconds"] = round(time.perf_counter() - t, 3)
    print(f"\nprecompiled header: {report['pch_seconds']:.1f} s (once per machine)", flush=True)
    g01 = DATA / "problems" / PROBLEMS["g01"][0]
    for style in ("cuda_split_ok", "cuda_ok"):
        src = (DATA / "candidates" / PROBLEMS["g01"][1] / f"{style}.py").read_text()
        # cold: never built; cached: the same source again in the same worker; disk: in a new process, so the build
        # comes from the on-disk cache and not from the process's already loaded module
        for label in ("cold", "cached", "disk"):
            row = review_once(g01, src, work / f"g01_{style}_{label}.py", f"g01 {style} {label}", "cuda",
                              reuse=label != "disk")
            report["cuda"].append(row)
            print(f"  {row['case']}: compile={row['compile']} correct={row['correct']}", flush=True)

    # 3. Overlap: build a new CUDA variant on CPU cores while the GPU reviews a Triton candidate, then review it
    from kernelskill.candidate import parse_candidate
    from kernelskill.settings import ReviewSettings

    split = (DATA / "candidates" / PROBLEMS["g01"][1] / "cuda_split_ok.py").read_text()
    variant = cuda_variant(split, 7)
    vpath = work / "g01_split_v7.py"
    vpath.write_text(variant)
    vcand = parse_candidate(variant, vpath)
    tri = triton_variant((DATA / "candidates" / PROBLEMS["g01"][1] / "triton_ok.py").read_text(), 9)
    tpath = work / "g01_triton_v9.py"
    tpath.write_text(tri)
    settings = ReviewSettings(device="cuda")
    built: dict = {}

    def do_prebuild():
        t = time.perf_counter()
        built["result"] = prebuild(g01, vcand, settings.model_copy(update={"backend": "cuda"}), log_dir=work / "pre")
        built["wall"] = time.perf_counter() - t

    t0 = time.perf_counter()
    thread = threading.Thread(target=do_prebuild)
    thread.start()
    tres = review(g01, parse_candidate(tri, tpath), settings.model_copy(update={"backend": "triton"}),
                  log_dir=work / "tri9")
    gpu_review_s = time.perf_counter() - t0
    thread.join()
    both_s = time.perf_counter() - t0
    row = review_once(g01, variant, work / "g01_split_v7_review.py", "g01 split v7 after prebuild", "cuda")
    pre = built.get("result")
    report["overlap"] = {
        "gpu_review_wall": round(gpu_review_s, 3), "prebuild_wall": round(built.get("wall", -1), 3),
        "both_wall": round(both_s, 3), "sequential_would_be": round(gpu_review_s + built.get("wall", 0), 3),
        "prebuild_failed": bool(pre and pre.result), "triton_review_correct": tres.correct,
        "review_after_prebuild": row,
    }
    print("\nOverlap: a CUDA build on CPU cores while the GPU reviews a Triton candidate")
    print(json.dumps(report["overlap"], indent=2))
    print_rows("CUDA candidates (g01, 64M elements)", report["cuda"] + [row])
    report["idle_workers"] = POOL.idle_pids()

    # 4. plain load_inline vs our build path, cold and cached
    if not args.skip_build_bench:
        bench_json = work / "build_bench.json"
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_bench.py"), "--json", str(bench_json)],
                             capture_output=True, text=True, env={**os.environ, "KERNELSKILL_CACHE": str(work / "bench-cache")})
        print("\n" + out.stdout + out.stderr[-3000:])
        table = json.loads(bench_json.read_text())["table"] if bench_json.exists() else []
        report["build_bench"] = {"rc": out.returncode, "stdout": out.stdout, "table": table}

    # targets
    warm = [r for r in report["triton"] if r["worker"] == "warm"]
    checks = {
        "triton warm review <= 5 s": bool(warm) and all(r["review_s"] <= 5 for r in warm),
        "cuda cached compile <= 1 s": all(r["compile"] is not None and r["compile"] <= 1
                                          for r in report["cuda"] if r["case"].endswith(("cached", "disk"))),
        "all correct": all(r["correct"] for r in report["triton"] + report["cuda"]) and row["correct"],
        "prebuilt variant compiled from cache (<= 1 s)": row["compile"] is not None and row["compile"] <= 1,
    }
    if not args.skip_build_bench:
        table = report["build_bench"]["table"]
        rows = {(r["style"], r["path"]): r for r in table}
        styles = sorted({r["style"] for r in table})
        checks["cuda cold build <= 0.5x plain load_inline, every style"] = bool(styles) and all(
            (s, "cold") in rows and rows[s, "cold"]["ratio"] <= 0.5 and rows[s, "cold"]["check"] == "ok" for s in styles)
        checks["cuda build of the same source again <= 1 s, every style"] = bool(styles) and all(
            (s, "cached") in rows and rows[s, "cached"]["seconds"] <= 1 for s in styles)
    report["checks"] = checks
    print("\nTargets:")
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "throughput.json").write_text(json.dumps(report, indent=2, default=str))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
