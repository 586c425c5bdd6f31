"""`kernelskill bench` on a GPU host with the scripted local OpenAI-compatible server (instant replies).

Copies N of the repository's own problems (tests/data/problems/p*.py, each with its correct Triton kernel as the
scripted seed) into a KernelBench-style folder, starts the scripted server, runs bench once per `--gpus` setting and
prints the summary table and tasks per minute.

    python scripts/gpu_bench_check.py --tasks 10 --gpus 0 --baseline compile --out $OUT
    python scripts/gpu_bench_check.py --tasks 16 --gpus 0 --gpus 0,1 --out $OUT     (scaling: 1 GPU, then 2)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelskill.bench.scripted_team import ScriptedTeam, TaskScript, read  # noqa: E402
from kernelskill.llm.local_server import ScriptedServer  # noqa: E402

DATA = ROOT / "tests" / "data"


def make_problems(folder: Path, n: int) -> ScriptedTeam:
    folder.mkdir(parents=True, exist_ok=True)
    sources = sorted((DATA / "problems").glob("p*.py"))
    scripts = {}
    for i in range(n):
        src = sources[i % len(sources)]
        name = f"{i + 1}_{src.stem.split('_', 1)[1]}" + (f"_{i // len(sources)}" if i >= len(sources) else "")
        shutil.copy(src, folder / f"{name}.py")
        kernel = read(DATA / "candidates" / src.stem / "triton_ok.py")
        scripts[name] = TaskScript(seed=kernel)
    return ScriptedTeam(scripts)


def fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--gpus", action="append", default=[], help="one bench run per value, e.g. 0 and 0,1")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", choices=["compile"])
    parser.add_argument("--profile", default="off")
    parser.add_argument("--device", default="cuda", help="cpu to try the script without a GPU")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/kernelskill-gpu-bench")))
    args = parser.parse_args()
    problems = args.out / "problems" / "level1"
    team = make_problems(problems, args.tasks)
    server = ScriptedServer().start()
    server.responder = team
    rows = []
    try:
        for gpus in args.gpus or ["0"]:
            out = args.out / f"run_gpus_{gpus.replace(',', '_')}"
            cmd = [sys.executable, "-m", "kernelskill.cli", "bench", "--problems", str(args.out / "problems"),
                   "--model", "openai/scripted", "--base-url", server.openai_url, "--device", args.device, "--gpus", gpus,
                   "--seeds", str(args.seeds), "--rounds", str(args.rounds), "--profile", args.profile,
                   "--out", str(out)] + (["--baseline", args.baseline] if args.baseline else [])
            print("$ " + " ".join(cmd), flush=True)
            env = dict(os.environ, OPENAI_API_KEY="scripted-server-needs-no-key")
            start = time.monotonic()
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            wall = time.monotonic() - start
            print(proc.stdout[-4000:], proc.stderr[-3000:], sep="\n", flush=True)
            results = json.loads((out / "results.json").read_text())
            o = results["overall"]
            rows.append((gpus, wall, results))
            print(f"gpus {gpus}: {o['tasks']} tasks in {wall:.0f} s = {o['tasks'] / wall * 60:.2f} tasks/min; "
                  f"success {o['success']:.1%}, speedup_mean {o['speedup_mean']}, fast_1 {o['fast_1']:.1%}",
                  flush=True)
            print(f"{'task':<28}{'verdict':<10}{'speedup':>9}{'vs compile':>12}{'eager ms':>10}{'best ms':>10}  flags")
            for t in results["tasks"]:
                verdict = "correct" if t["success"] else t["status"]
                print(f"{t['name']:<28}{verdict:<10}{fmt(t['best_speedup'], '.3f', 'x'):>9}"
                      f"{fmt(t['speedup_vs_compile'], '.3f', 'x'):>12}{fmt(t['eager_ms'], '.4f'):>10}"
                      f"{fmt(t['best_ms'], '.4f'):>10}  {';'.join(t['flags'])}")
            for level, m in results["levels"].items():
                vc = m.get("vs_compile") or {}
                print(f"level {level}: tasks {m['tasks']} success {m['success']:.1%} speedup_mean "
                      f"{m['speedup_mean']} geomean {m['speedup_geomean']} fast_1 {m['fast_1']:.1%} "
                      f"vs compile: {json.dumps(vc)}")
    finally:
        server.stop()
    if len(rows) > 1:
        base = rows[0][1]
        print("\nscaling: gpus, wall s, tasks/min, speedup of throughput, efficiency vs linear, identical verdicts")
        first = {t["name"]: t["success"] for t in rows[0][2]["tasks"]}
        for gpus, wall, results in rows:
            n = len(gpus.split(","))
            same = {t["name"]: t["success"] for t in results["tasks"]} == first
            print(f"  {gpus:<8} {wall:7.0f} {len(results['tasks']) / wall * 60:8.2f} {base / wall:6.2f}x "
                  f"{base / wall / n:6.1%}  {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
