"""Side by side: torch's load_inline against kernelskill's builder (review/cuda/), cold and cached.

Run on the GPU machine from the repository root (no network needed):

    python scripts/build_bench.py                      # three source styles, each path once, GPU check on
    python scripts/build_bench.py --repeat 3           # medians of three fresh runs each
    python scripts/build_bench.py --arch 9.0           # the target arch (default: TORCH_CUDA_ARCH_LIST, else the GPU)
    python scripts/build_bench.py --cpp-only           # no GPU, no nvcc: the C++ unit alone (runs on a CPU machine)

The kernel is the same everywhere: y = gelu(x) * scale on float32, in three source styles:

  split        cuda_sources: the __global__ kernel and a plain C++ launcher (raw pointers, cudaStream_t), no torch;
               cpp_sources: the torch::Tensor wrapper that calls the launcher
  kernelbench  cuda_sources: `#include <torch/extension.h>`, the kernel and the torch wrapper;
               cpp_sources: the wrapper's declaration only
  wrapper-in-cu  as kernelbench, without the `#include <torch/extension.h>` (torch prepends <torch/types.h> anyway)

and for each style these paths, every one in a fresh Python process (only the load_inline call is timed):

  plain        torch.utils.cpp_extension.load_inline, fresh TORCH_EXTENSIONS_DIR
  cold         kernelskill's builder, fresh cache except the precompiled header (its one-time cost is shown apart)
  cuda-changed the cold run's cache, CUDA sources changed by a comment: the C++ object is reused (the optimize loop)
  cached       the cold run's cache, same sources: import of the finished library

Each run checks the built function on the GPU against torch (--no-device-check to skip). Prints a table; writes
$OUT/build_bench.json when OUT is set (or --json PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

KERNEL = r"""
__global__ void gelu_scale_kernel(const float* __restrict__ x, float* __restrict__ y, float scale, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) * scale;
    }
}
"""

SPLIT_CUDA = "#include <cstdint>\n" + KERNEL + r"""
cudaError_t gelu_scale_launch(const float* x, float* y, float scale, int64_t n, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    const int threads = 256;
    gelu_scale_kernel<<<(unsigned int)((n + threads - 1) / threads), threads, 0, stream>>>(x, y, scale, n);
    return cudaGetLastError();
}
"""

SPLIT_CPP = r"""
#include <c10/cuda/CUDAStream.h>

cudaError_t gelu_scale_launch(const float* x, float* y, float scale, int64_t n, cudaStream_t stream);

torch::Tensor gelu_scale(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    cudaError_t err = gelu_scale_launch(xc.data_ptr<float>(), y.data_ptr<float>(), (float)scale, xc.numel(),
                                        c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "gelu_scale launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

WRAPPER = r"""
torch::Tensor gelu_scale(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    gelu_scale_kernel<<<(unsigned int)((n + threads - 1) / threads), threads>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), (float)scale, n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "gelu_scale launch failed");
    return y;
}
"""

DECLARATION = "torch::Tensor gelu_scale(torch::Tensor x, double scale);"

CPU_CPP = r"""
torch::Tensor gelu_scale(torch::Tensor x, double scale) {
    return torch::gelu(x) * scale;
}
"""

STYLES = {
    "split": dict(cpp_sources=SPLIT_CPP, cuda_sources=SPLIT_CUDA),
    "kernelbench": dict(cpp_sources=DECLARATION, cuda_sources="#include <torch/extension.h>\n#include <cuda_runtime.h>\n"
                        + KERNEL + WRAPPER),
    "wrapper-in-cu": dict(cpp_sources=DECLARATION, cuda_sources="#include <cuda_runtime.h>\n" + KERNEL + WRAPPER),
}

# Runs in a fresh interpreter: import torch first, then time load_inline alone, then check the function.
CHILD = r"""
import json, sys, time
spec = json.loads(sys.argv[1])
import torch
if spec["path"] == "plain":
    from torch.utils.cpp_extension import load_inline
else:
    from kernelskill.review.cuda import inline
    load_inline = inline.load_inline
start = time.perf_counter()
module = load_inline(**spec["kwargs"])
result = {"seconds": time.perf_counter() - start}
if spec["path"] != "plain":
    b = inline.BUILDS[-1]
    result.update(cache_hit=b.cache_hit, steps=b.steps, notes=b.notes, pch_used=b.pch_used,
                  cuda_variant=b.cuda_variant, warnings=b.warnings)
if spec["check"]:
    device = spec["device"]
    x = torch.randn(1 << 20, device=device)
    y = module.gelu_scale(x, 1.5)
    expected = torch.nn.functional.gelu(x) * 1.5
    if device == "cuda":
        torch.cuda.synchronize()
    err = (y - expected).abs().max().item()
    result["check"] = {"max_abs_err": err, "ok": bool(err < 1e-4)}
print("RESULT " + json.dumps(result))
"""

PCH_CHILD = r"""
import json, sys
from kernelskill.review.cuda.pch import prepare_pch
print("RESULT " + json.dumps({"seconds": prepare_pch(with_cuda=sys.argv[1] == "1")}))
"""


def run_child(code: str, args: list[str], env: dict, timeout: float) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout)[-4000:]}
    return json.loads(lines[-1][len("RESULT "):])


def base_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def fresh_cache(work: Path, pch_root: Path) -> Path:
    """A new kernelskill cache that shares only the precompiled headers."""
    cache = Path(tempfile.mkdtemp(prefix="ks-cache-", dir=work))
    (cache / "cuda-build").mkdir()
    (cache / "cuda-build" / "pch").symlink_to(pch_root / "cuda-build" / "pch", target_is_directory=True)
    return cache


def measure(style: str, kwargs: dict, args, work: Path, pch_root: Path, log) -> list[dict]:
    device = "cpu" if args.cpp_only else "cuda"
    check = args.device_check
    rows = []

    def one(path: str, call_kwargs: dict, env: dict) -> dict:
        spec = {"path": path, "kwargs": call_kwargs, "check": check, "device": device}
        log(f"  {style:13s} {path:12s} ...")
        started = time.perf_counter()
        result = run_child(CHILD, [json.dumps(spec)], env, args.timeout)
        result["wall"] = round(time.perf_counter() - started, 2)
        log(f"    {result.get('seconds', float('nan')):.2f} s" + (f"  ERROR {result['error'][-800:]}"
                                                                     if "error" in result else ""))
        return result

    for rep in range(args.repeat):
        name = f"bench_{style.replace('-', '_')}"
        call = dict(name=name, functions=["gelu_scale"], extra_cuda_cflags=["-O3"], **kwargs)
        plain_dir = Path(tempfile.mkdtemp(prefix="torch-ext-", dir=work))
        rows.append({"style": style, "path": "plain", "repeat": rep,
                     **one("plain", call, {**base_env(), "TORCH_EXTENSIONS_DIR": str(plain_dir)})})
        cache = fresh_cache(work, pch_root)
        env = {**base_env(), "KERNELSKILL_CACHE": str(cache)}
        rows.append({"style": style, "path": "cold", "repeat": rep, **one("cold", call, env)})
        if kwargs.get("cuda_sources"):
            changed = {**call, "cuda_sources": call["cuda_sources"] + f"\n// changed {rep}\n"}
            rows.append({"style": style, "path": "cuda-changed", "repeat": rep, **one("cuda-changed", changed, env)})
        rows.append({"style": style, "path": "cached", "repeat": rep, **one("cached", call, env)})
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    table = []
    for style in dict.fromkeys(r["style"] for r in rows):
        plain = [r["seconds"] for r in rows if r["style"] == style and r["path"] == "plain" and "seconds" in r]
        plain_median = statistics.median(plain) if plain else None
        for path in dict.fromkeys(r["path"] for r in rows if r["style"] == style):
            runs = [r for r in rows if r["style"] == style and r["path"] == path]
            secs = [r["seconds"] for r in runs if "seconds" in r]
            median = statistics.median(secs) if secs else None
            checks = [r["check"]["ok"] for r in runs if "check" in r]
            table.append({
                "style": style, "path": path, "seconds": median, "samples": secs,
                "cache_hit": sorted({str(r.get("cache_hit", "-")) for r in runs}),
                "ratio": round(median / plain_median, 3) if median is not None and plain_median else None,
                "check": "skipped" if not checks else ("ok" if all(checks) else "FAILED"),
                "errors": sum("error" in r for r in runs),
                "variant": sorted({str(r.get("cuda_variant")) for r in runs if "cuda_variant" in r}),
            })
    return table


def environment(args) -> dict:
    probe = ("import json, os, sys, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
             "'python': sys.version.split()[0], 'cores': os.cpu_count(), 'gpu': torch.cuda.get_device_name() "
             "if torch.cuda.is_available() else None}))")
    info = json.loads(subprocess.run([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True,
                                     check=True).stdout)
    for tool in ("c++", "nvcc"):
        if shutil.which(tool):
            out = subprocess.run([tool, "--version"], stdout=subprocess.PIPE, text=True, check=False).stdout
            info[tool] = [line for line in out.splitlines() if line.strip()][-1 if tool == "nvcc" else 0]
    info["arch"] = args.arch or os.environ.get("TORCH_CUDA_ARCH_LIST") or "(the visible GPU)"
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", help="target arch for both builders, e.g. 9.0 (sets TORCH_CUDA_ARCH_LIST)")
    parser.add_argument("--repeat", type=int, default=1, help="fresh runs per path (default 1)")
    parser.add_argument("--device-check", action=argparse.BooleanOptionalAction, default=True,
                        help="check each built function against torch (default on)")
    parser.add_argument("--cpp-only", action="store_true", help="C++ extension only, on the CPU (no GPU, no nvcc)")
    parser.add_argument("--styles", default=",".join(STYLES), help="comma-separated subset of: " + ", ".join(STYLES))
    parser.add_argument("--timeout", type=float, default=600, help="seconds per build process")
    parser.add_argument("--json", help="write results here (default: $OUT/build_bench.json when OUT is set)")
    args = parser.parse_args(argv)
    if args.arch:
        os.environ["TORCH_CUDA_ARCH_LIST"] = args.arch  # torch's builder and ours both read it

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    info = environment(args)
    log("environment: " + json.dumps(info))
    styles = {"cpp-only": dict(cpp_sources=CPU_CPP)} if args.cpp_only else \
        {s: STYLES[s] for s in args.styles.split(",")}
    work = Path(tempfile.mkdtemp(prefix="build-bench-"))
    try:
        pch_root = work / "pch-cache"
        pch_env = {**base_env(), "KERNELSKILL_CACHE": str(pch_root)}
        log("building the precompiled header (once) ...")
        pch = run_child(PCH_CHILD, ["0" if args.cpp_only else "1"], pch_env, args.timeout)
        if "error" in pch:
            log("precompiled header failed:\n" + pch["error"])
            return 1
        log(f"  {pch['seconds']:.2f} s")
        rows = []
        for style, kwargs in styles.items():
            rows += measure(style, kwargs, args, work, pch_root, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = summarize(rows)
    print(f"\nprecompiled <torch/extension.h>, built once: {pch['seconds']:.2f} s")
    print(f"{'style':14s} {'path':13s} {'seconds':>8s} {'cache hit':>10s} {'vs plain':>9s}  check   samples")
    for t in table:
        seconds = f"{t['seconds']:.2f}" if t["seconds"] is not None else "error"
        ratio = f"{t['ratio']:.2f}" if t["ratio"] is not None else "-"
        samples = " ".join(f"{s:.2f}" for s in t["samples"])
        flag = f"  ({t['errors']} errors)" if t["errors"] else ""
        print(f"{t['style']:14s} {t['path']:13s} {seconds:>8s} {'/'.join(t['cache_hit']):>10s} {ratio:>9s}  "
              f"{t['check']:7s} {samples}{flag}")
    notes = sorted({f"{r['style']}/{r['path']}: {n}" for r in rows for n in r.get("notes", [])}
                   | {f"{r['style']}/{r['path']}: precompiled header NOT used" for r in rows if r.get("pch_used") is False})
    if notes:
        print("\nnotes from the builder:\n  " + "\n  ".join(notes))
    out = {"environment": info, "pch_seconds": pch["seconds"], "table": table, "runs": rows}
    target = args.json or (os.path.join(os.environ["OUT"], "build_bench.json") if os.environ.get("OUT") else None)
    if target:
        Path(target).write_text(json.dumps(out, indent=1))
        print(f"\nwrote {target}")
    failed = any(t["check"] == "FAILED" or t["errors"] for t in table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
