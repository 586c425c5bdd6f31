"""The trust boundary on a GPU: each case reviewed with the judge on (the verdict decided outside the runner,
review/judge.py) and off (the runner's own report, as before), side by side in one run: verdicts, speedups and
the wall time of a review, so the judge's price is a ratio measured here.

    python scripts/trust_check.py --out DIR [--only NAME,...] [--spares 2]

Prints a table; with --out writes trust.json there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = ROOT / "tests" / "data"

from kernelskill.candidate import read_candidate  # noqa: E402
from kernelskill.review.reviewer import review  # noqa: E402
from kernelskill.settings import Guards, ReviewSettings  # noqa: E402

P01 = "problems/p01_pointwise_gelu_chain.py"
G01 = "problems/gpu/g01_pointwise_chain_64m.py"
PUB = "public/cuda_l1"
KB = "public/kernelbench"
# (name, problem, candidate, rules, what the judge must say: correct / not correct / a flag it must raise)
CASES = [
    ("honest triton p01", P01, "candidates/p01_pointwise_gelu_chain/triton_ok.py", "strict", "correct"),
    ("honest triton g01 64M", G01, "candidates/g01_pointwise_chain_64m/triton_ok.py", "strict", "correct"),
    ("honest cuda g01 64M", G01, "candidates/g01_pointwise_chain_64m/cuda_ok.py", "strict", "correct"),
    ("CUDA-L1 L1/17", f"{PUB}/L1_17_problem.py", f"{PUB}/L1_17_kernel.py", "kernelbench", "correct"),
    ("CUDA-L1 L2/68", f"{PUB}/L2_68_problem.py", f"{PUB}/L2_68_kernel.py", "kernelbench", "correct"),
    ("CUDA-L1 L3/31", f"{PUB}/L3_31_problem.py", f"{PUB}/L3_31_kernel.py", "kernelbench", "correct"),
    ("forged verdict", P01, "attacks/forged_verdict.py", "kernelbench", "not correct"),
    ("garbage after checks", P01, "attacks/garbage_later.py", "kernelbench", "not correct"),
    # 20 ms a call where they claim microseconds: their batch is cut at the judge's limit (judge.batch_cut)
    ("fingerprint cache", P01, "attacks/fingerprint_cache.py", "kernelbench", "cut"),
    ("prepare precompute", P01, "attacks/prepare_precompute.py", "kernelbench", "cut"),
    # work moved out of the batch's timed calls into its prepare (on inputs masked until the calls) and its commit
    # (whose outputs are held to the digests said at the calls' end): on g01's 256 MB tensors the file transfers
    # there took far longer than the calls, and what the judge excuses of them hid the work before (session 13)
    ("prepare lookup g01", G01, "attacks/prepare_lookup.py", "kernelbench", "caught"),
    ("commit compute g01", G01, "attacks/commit_compute.py", "kernelbench", "not correct"),
    # zeros from one call in 97 of the judge's batch alone: every call not compared whole is compared at positions
    # drawn after the batch
    ("skip in batch", P01, "attacks/skip_in_batch.py", "kernelbench", "not correct"),
    # on a GPU the sleep is host time, which the robust protocol's GPU figure leaves out: not inflated either way
    ("reference sabotage", P01, "attacks/reference_sabotage.py", "kernelbench", "not inflated"),
    ("side stream (cheat)", P01, "cheats/side_stream.py", "kernelbench", "not correct"),
    ("cached output (cheat)", P01, "cheats/cache_call_count.py", "kernelbench", "not correct"),
    # torch.compile replaced by a 5 ms-a-call wrapper at import: judged, torch.compile(Model) is timed in the
    # reference runner, where the wrapper never ran (the runner-only figure takes the wrapper's sleep)
    ("compile sabotage", P01, "attacks/compile_sabotage.py", "kernelbench", "compile not slowed"),
    # KernelBench's own adversarial kernels (tests/data/public/README.md), on their 4096x4096 matmul
    ("KB zero out", f"{KB}/L1_1_problem.py", f"{KB}/unit_test_zero_out_kernel.py", "kernelbench", "not correct"),
    ("KB result reuse", f"{KB}/L1_1_problem.py", f"{KB}/unit_test_result_reuse_kernel.py", "kernelbench",
     "not correct"),
    ("KB non-default stream", f"{KB}/L1_1_problem.py", f"{KB}/unit_test_non_default_stream_kernel.py", "kernelbench",
     "no false speedup"),
]
BASELINE = {"compile sabotage": "compile"}


def run(case, judge: bool, log_dir: Path) -> dict:
    name, problem, cand, rules, _ = case
    guards = Guards(static_checks=not name.startswith(("forged", "garbage", "fingerprint", "reference sab", "prepare",
                                                         "commit", "skip", "compile sab", "KB ")),
                    integrity=name not in ("reference sabotage", "prepare precompute", "compile sabotage",
                                           "prepare lookup g01", "commit compute g01"),
                    judge=judge)
    settings = ReviewSettings(device="cuda", rules=rules, guards=guards, baseline=BASELINE.get(name))
    start = time.perf_counter()
    result = review(DATA / problem, read_candidate(DATA / cand, None), settings, log_dir=log_dir)
    wall = time.perf_counter() - start
    return {"correct": result.correct, "error_kind": result.error_kind, "error": (result.error or "")[:300],
            "speedup": result.speedup, "flags": [f.split(":")[0] for f in result.flags], "wall_s": round(wall, 2),
            "stage_seconds": result.stage_seconds,
            "judge_batch": result.judge_batch.model_dump() if result.judge_batch else None,
            "host_us": result.timing.host_us if result.timing else None,
            "compiled_ms": (result.timing.compiled_reference.median_ms
                            if result.timing and result.timing.compiled_reference else None),
            "speedup_vs_compile": result.speedup_vs_compile,
            "speedup_host_paced": result.timing.speedup_host_paced if result.timing else None}


def holds(expect: str, r: dict, off: dict | None = None) -> bool:
    if expect == "not inflated":
        return r["correct"] and (r["speedup"] or 0) <= 1.1 * max(1.0, (off or {}).get("speedup") or 0)
    if expect == "correct":
        return r["correct"]
    if expect == "no false speedup":  # KernelBench's own test of its stream kernel: above 1.5x is the cheat's
        return not r["correct"] or (r["speedup"] or 0) <= 1.5
    if expect == "compile not slowed":  # its speedup over torch.compile is not inflated: on a CPU the wrapper's
        # 5 ms a call is in the runner-only figure; on a GPU its events leave host time out (as for the reference)
        return (r["correct"] and r.get("speedup_vs_compile") is not None
                and r["speedup_vs_compile"] <= 1.1 * max(1.0, (off or {}).get("speedup_vs_compile") or 0))
    if expect == "not correct":
        return not r["correct"]
    if expect == "cut":
        return not r["correct"] and r["error_kind"] == "timeout" and "was stopped" in r["error"]
    if expect == "caught":  # cut, or its figure put at the judge's pace
        return holds("cut", r) or (r["correct"] and "timing_unconfirmed" in r["flags"])
    return expect in r["flags"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", default="")
    parser.add_argument("--spares", type=int, default=2, help="spare runners kept starting (as an evaluator does)")
    args = parser.parse_args()
    from kernelskill.review.sandbox import POOL

    POOL.spares = args.spares
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    rows = []
    logs = (args.out or Path("/tmp/trust")) / "logs"
    for i, case in enumerate(CASES):
        if only and not any(o in case[0] for o in only):
            continue
        row = {"case": case[0], "expect": case[4]}
        try:  # untimed: builds and first-call compiles land here, so neither timed path pays for them
            run(case, False, logs / f"{i}-warm")
        except Exception as exc:  # noqa: BLE001 - the timed runs say what broke
            print(f"{case[0]}: warm-up failed: {type(exc).__name__}: {exc}", flush=True)
        for judge in (True, False):
            try:
                row["on" if judge else "off"] = run(case, judge, logs / f"{i}-{'on' if judge else 'off'}")
            except Exception as exc:  # noqa: BLE001 - a row that says what broke
                row["on" if judge else "off"] = {"correct": False, "error_kind": "harness",
                                                 "error": f"{type(exc).__name__}: {exc}", "speedup": None,
                                                 "flags": [], "wall_s": None}
        row["holds"] = holds(case[4], row["on"], row["off"])
        rows.append(row)
        on, off = row["on"], row["off"]
        print(f"{case[0]:<24} judge: {'ok' if row['holds'] else 'FAILS':<5} "
              f"{str(on['correct']):<5} {on['speedup'] or 0:8.2f}x {on['wall_s'] or 0:6.1f}s | runner only: "
              f"{str(off['correct']):<5} {off['speedup'] or 0:8.2f}x {off['wall_s'] or 0:6.1f}s  "
              f"{on['error_kind'] or ''} {','.join(f for f in on['flags'] if f in ('timing_unconfirmed', 'reference_slowed'))}",
              flush=True)
        seconds, batch = on.get("stage_seconds") or {}, on.get("judge_batch")
        print(f"    judge side: reference runner {seconds.get('reference', 0):.2f}s (start "
              f"{seconds.get('reference_start', 0):.2f}s), candidate start {seconds.get('start', 0):.2f}s, trials "
              f"{seconds.get('judge_trials', 0):.2f}s, compare {seconds.get('judge_compare', 0):.2f}s, batch "
              f"{seconds.get('judge_batch', 0):.2f}s" + (
                  f"; pace us/call ref {batch['reference_pace_us']:.1f} cand {batch['candidate_pace_us']:.1f} "
                  f"claimed {batch['claimed_us']:.1f} ({batch['calls']} calls); prepare ref "
                  f"{batch['reference_s'].get('prepare', 0):.3f}s cand {batch['candidate_s'].get('prepare', 0):.3f}s"
                  if batch else ""), flush=True)
        if on.get("compiled_ms") is not None or off.get("compiled_ms") is not None:
            print(f"    torch.compile(Model): judged {on.get('compiled_ms')} ms (vs compile "
                  f"{on.get('speedup_vs_compile')}x), runner only {off.get('compiled_ms')} ms "
                  f"({off.get('speedup_vs_compile')}x)", flush=True)
    honest = [r for r in rows if r["expect"] == "correct" and r["on"]["wall_s"] and r["off"]["wall_s"]]
    if honest:
        ratio = statistics.median(r["on"]["wall_s"] / r["off"]["wall_s"] for r in honest)
        print(f"\nmedian review wall time, judge on / runner only, over {len(honest)} honest cases (each built and run "
              f"once before, untimed): {ratio:.2f}x")
    print(f"judge holds in {sum(r['holds'] for r in rows)} of {len(rows)} cases")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "trust.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
