"""Which way the builder compiled each corpus kernel's CUDA unit, and whether any failed: compile only, no GPU.

    python scripts/build_variants.py --corpus .devdata/corpus [--jobs 2] [--json OUT.json] [--limit N]

Every kernel of the corpus that calls `load_inline`, and the single-kernel fixtures under tests/data, is run in a
fresh Python process with kernelskill's stand-in in "check" mode (`review.cuda.inline`: compile both units, link
nothing), so it runs on a CPU machine with nvcc. A kernel whose module builds nothing when it runs gets its
`ModelNew(*get_init_inputs())` constructed on the meta device, as a prebuild does; one that calls `load_inline` only
in `forward` (on a GPU) has the call's arguments read from its source, where they are strings assigned to names. Per
build it records the CUDA unit's variant ("split", "split-types", "split-extension": device and host parts compiled
apart; "core", "types.h": fewer of torch's headers; "torch-free"; "exact": as torch compiles it), the builder's notes (why a variant fell back) and the seconds. All builds share one cache
($KERNELSKILL_CACHE, default a fresh folder), so the precompiled headers are built once.

Prints the count per variant, then every kernel that fell back from "split" or failed, with the first error line.
This is the check that a change to `review/cuda/split.py` or `plan.py` keeps every kernel building; the seconds are
this machine's.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
spec = json.loads(sys.argv[1])
import torch
import torch.utils.cpp_extension
from kernelskill.review.cuda import inline
from kernelskill.review.cuda.build import CudaCompileError
inline.install("check", spec["arch"])
out = {"builds": []}
try:
    scope = {"__name__": "ks_candidate", "__file__": spec["kernel"]}
    exec(compile(open(spec["kernel"]).read(), spec["kernel"], "exec"), scope)
    if not inline.BUILDS and "ModelNew" in scope and spec.get("problem"):
        problem = {"__name__": "ks_problem"}
        exec(compile(open(spec["problem"]).read(), spec["problem"], "exec"), problem)
        with torch.device("meta"):
            scope["ModelNew"](*problem["get_init_inputs"]())
except CudaCompileError as exc:
    out["error"] = ("own code: " if exc.in_own_code else "builder: ") + str(exc)[:1500]
except BaseException as exc:  # the kernel's own Python, not the builder: recorded, not a build failure
    out["python_error"] = f"{type(exc).__name__}: {exc}"[:300]
# a load_inline the module calls only in forward (on a GPU): its arguments read from the source, where they are
# strings assigned to names
import ast
tree = ast.parse(open(spec["kernel"]).read())
strings = {}
for node in ast.walk(tree):  # module-level strings first, then those of functions (a name reused: the last)
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        try:
            strings[node.targets[0].id] = ast.literal_eval(node.value)
        except ValueError:
            pass
def value(node):
    if isinstance(node, ast.Name):
        return strings[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [value(e) for e in node.elts]
    return ast.literal_eval(node)
calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", ""))
         == "load_inline"] if not inline.BUILDS else []
try:
    for call in calls:
        kwargs = {k.arg: value(k.value) for k in call.keywords if k.arg in (
            "name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags", "with_cuda")}
        if "cuda_sources" in kwargs:
            torch.utils.cpp_extension.load_inline(**kwargs)
            out["from_source"] = True
except CudaCompileError as exc:
    out["error"] = ("own code: " if exc.in_own_code else "builder: ") + str(exc)[:1500]
except BaseException as exc:  # the kernel's own Python, not the builder: recorded, not a build failure
    out["python_error"] = f"{type(exc).__name__}: {exc}"[:300]
for b in inline.BUILDS:
    out["builds"].append({"variant": b.cuda_variant, "notes": b.notes, "seconds": b.seconds,
                          "cache_hit": b.cache_hit, "steps": b.steps})
print("RESULT " + json.dumps(out))
"""


def kernels(corpus: Path | None) -> list[tuple[str, Path, Path | None]]:
    out = []
    if corpus:
        index = json.loads((corpus / "corpus.json").read_text())
        for e in index["entries"]:
            if e.get("kernel") and "load_inline" in (corpus / e["kernel"]).read_text(errors="replace"):
                out.append((f"L{e['level']}/{e['name']}", corpus / e["kernel"], corpus / e["problem"]))
    data = ROOT / "tests" / "data"
    for path in sorted((data / "public").glob("*/*.py")) + sorted((data / "decision").glob("*/*/candidate.py")):
        text = path.read_text()
        if "load_inline(" in text and "cuda_sources" in text and not path.name.startswith("unit_test_"):
            problem = next((p for p in (path.with_name(path.name.replace("kernel", "problem")),
                                        path.with_name("problem.py")) if p != path and p.exists()), None)
            out.append((str(path.relative_to(ROOT)), path, problem))
    return out


def run(name: str, kernel: Path, problem: Path | None, env: dict, arch: str, timeout: float) -> dict:
    spec = {"kernel": str(kernel.resolve()), "problem": str(problem.resolve()) if problem else None, "arch": arch}
    with tempfile.TemporaryDirectory(prefix="ks-variant-") as cwd:  # the kernel may write files where it runs
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], env=env, cwd=cwd, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    row = json.loads(lines[-1][7:]) if lines else {"builds": [], "error": "no result: " + proc.stdout[-1500:]}
    row["task"] = name
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=None, help="a corpus from `kernelskill corpus import`")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--arch", default="9.0")
    p.add_argument("--limit", type=int, default=0, help="only the first N kernels")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    todo = kernels(args.corpus)[:args.limit or None]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.setdefault("KERNELSKILL_CACHE", tempfile.mkdtemp(prefix="ks-variant-cache-"))
    print(f"{len(todo)} kernels; cache {env['KERNELSKILL_CACHE']}", flush=True)

    def one(item):
        try:
            row = run(*item, env, args.arch, args.timeout)
        except subprocess.TimeoutExpired:
            row = {"task": item[0], "builds": [], "error": f"timed out after {args.timeout:.0f} s"}
        variants = ",".join(str(b["variant"]) for b in row["builds"]) or "-"
        print(f"  {row['task']:<60} {variants:<14} {sum(b['seconds'] for b in row['builds']):6.1f} s"
              + (f"  ERROR {row['error'].splitlines()[0][:100]}" if row.get("error") else ""), flush=True)
        return row

    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one, todo))
    counts = collections.Counter(b["variant"] for r in rows for b in r["builds"])
    print("\nCUDA units by variant: " + ", ".join(f"{k}: {v}" for k, v in counts.most_common()))
    print(f"failed builds: {sum(bool(r.get('error')) for r in rows)}; kernels whose module built nothing: "
          f"{sum(not r['builds'] and not r.get('error') for r in rows)}")
    for r in rows:
        fell = [n for b in r["builds"] for n in b["notes"] if "(split) failed" in n]
        if r.get("error") or fell:
            print(f"  {r['task']}: " + (r.get("error") or fell[0]).splitlines()[0][:220])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
