"""`kernelskill optimize` on a GPU host, in one call: the CPU test suite's end-to-end loop tests run again with
--device cuda (local scripted OpenAI-compatible server, real reviews on the GPU), then the README's replay example,
then a table of every round and the decisions the policy took.

    python scripts/gpu_optimize_check.py [--out DIR] [--skip-tests] [--skip-example]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(cmd: list[str], env: dict | None = None, timeout: int = 540) -> int:
    print("$ " + " ".join(cmd), flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, timeout=timeout)
    print(f"[exit {proc.returncode}, {time.monotonic() - start:.0f} s]", flush=True)
    return proc.returncode


def example(out: Path) -> int:
    run_dir = out / "example_run"
    code = run([sys.executable, "-m", "kernelskill.cli", "optimize", "examples/gelu_chain.py", "--model",
                "replay:examples/gelu_chain.transcript.jsonl", "--rounds", "3", "--profile", "off", "--device", "cuda",
                "--out", str(run_dir)])
    sys.path.insert(0, str(ROOT / "src"))
    from kernelskill.store import RunStore

    with RunStore.open(run_dir) as store:
        task = store.tasks(store.latest_run().id)[0]
        print("\nround  branch    status  method            verdict         speedup")
        for r in store.rounds(task.id):
            o = r.outcome or {}
            sp = o.get("speedup")
            print(f"{r.idx:>5}  {r.branch:<8}  {r.status:<6}  {str(r.method or '-'):<16}  "
                  f"{str(o.get('verdict', '-')):<14}  {'-' if sp is None else f'{sp:.3f}x'}")
        print("\ndecisions (base kernel -> bottleneck, case, allowed methods, ncu status):")
        for d in store.decisions(task.id):
            label = store.candidate(d.candidate_id).label if d.candidate_id else "-"
            print(f"  {label:<10} {d.bottleneck:<22} {str(d.case_id):<24} {d.allowed}  "
                  f"ncu={d.decision.get('ncu_status')}")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.pop("history", None)
    print(json.dumps(summary, indent=2))
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/kernelskill-gpu-optimize")))
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-example", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    codes = []
    if not args.skip_tests:
        env = dict(os.environ, KERNELSKILL_TEST_DEVICE="cuda", KERNELSKILL_TEST_OUT=str(args.out))
        codes.append(run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                          "tests/loop/test_optimize_server.py", "-k", "full_loop or killed"], env=env))
        for name in ("full_loop", "full_loop_replayed", "killed_and_resumed"):
            path = args.out / f"{name}.summary.json"
            if path.exists():
                s = json.loads(path.read_text())
                print(f"\n{name}: success={s['success']} best={s['best_label']} "
                      f"best_speedup={s['best_speedup']} rounds_run={s['rounds_run']} llm_calls={s['llm_calls']} "
                      f"tokens={s['tokens']} ended={s['ended']!r} device={s['device']} seconds={s['seconds']}")
                for h in s["history"]:
                    sp = h["speedup"]
                    print(f"   {h['round']:>2}.{h['slot']} {h['branch']:<8} {str(h['method'] or '-'):<14} "
                          f"{h['verdict']:<14} {'-' if sp is None else f'{sp:.3f}x':>8} {h['promoted'] or ''}")
    if not args.skip_example:
        codes.append(example(args.out))
    return max(codes) if codes else 0


if __name__ == "__main__":
    sys.exit(main())
