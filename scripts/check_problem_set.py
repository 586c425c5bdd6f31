"""Does every problem of a problem set load here, and is its minimum work known? A CPU check, no GPU needed.

    python scripts/check_problem_set.py DIR [DIR ...] [--json OUT.json] [--timeout-s 60]

DIR is a folder of KernelBench-style problems (level1/, level2/, level3/ below it, or the .py files themselves).
For each problem, in one child process (problem code is run outside this one, with a time limit per problem):
read_problem (the KernelBench shape: Model, get_inputs, get_init_inputs), build_and_draw (what check_problem runs:
Model built and inputs drawn on the meta device, or on the CPU where the meta device cannot), and the problem's work
as the speed-of-light floor counts it (kernelskill.review.work: FLOPs and bytes on the meta device). Printed: per level, how many load and how
many have a known floor, then every problem that fails a step, with why.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("read", "check", "work")


def problems_under(folder: Path) -> list[Path]:
    if folder.is_file():
        return [folder]
    return sorted(p for p in folder.rglob("*.py") if not p.name.startswith("_"))


def child(paths: list[str], timeout_s: int) -> int:
    """In the child: one JSON line per problem."""
    import signal

    from kernelskill.problem import build_and_draw, read_problem
    from kernelskill.review.work import _measure

    def out_of_time(*_):
        raise TimeoutError(f"took over {timeout_s} s")

    signal.signal(signal.SIGALRM, out_of_time)
    for path in paths:
        row: dict = {"path": path}
        step = "read"
        signal.alarm(timeout_s)
        try:
            problem = read_problem(path)
            step = "check"
            build_and_draw(problem)
            step = "work"
            work = _measure(Path(path))
            row.update(flops=work.get("flops"), bytes=work.get("bytes"), precision=work.get("precision"),
                       work_note=work.get("note"))
            row["ok"] = "work" if work.get("flops") is not None and work.get("bytes") is not None else "check"
        except BaseException as exc:  # noqa: BLE001 - a problem's failure is the row, not the end of the run
            row.update(ok=STEPS[STEPS.index(step) - 1] if step != "read" else None, failed=step,
                       error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
        finally:
            signal.alarm(0)
        print(json.dumps(row), flush=True)
    return 0


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(json.loads(sys.argv[3]), int(sys.argv[2]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, help="write every row here")
    ap.add_argument("--timeout-s", type=int, default=60, help="per problem (default 60)")
    args = ap.parse_args()
    paths = [str(p) for f in args.folders for p in problems_under(f)]
    if not paths:
        sys.exit("no problem files under " + ", ".join(map(str, args.folders)))
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
    rows = []
    with subprocess.Popen([sys.executable, __file__, "--child", str(args.timeout_s), json.dumps(paths)],
                          stdout=subprocess.PIPE, text=True, env=env) as proc:
        for line in proc.stdout:
            if line.startswith("{"):
                rows.append(json.loads(line))
                print(f"\r{len(rows)}/{len(paths)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    done = {r["path"] for r in rows}
    rows += [{"path": p, "ok": None, "failed": "child", "error": "the checking process ended before this problem"}
             for p in paths if p not in done]
    by_level: dict[str, list[dict]] = {}
    for r in rows:
        level = next((part for part in Path(r["path"]).parts if part.startswith("level")), "-")
        by_level.setdefault(level, []).append(r)
    print(f"{'level':8s} {'problems':>8s} {'load':>6s} {'floor known':>11s}")
    for level, rs in sorted(by_level.items()):
        loads = sum(1 for r in rs if r.get("ok") in ("check", "work"))
        floor = sum(1 for r in rs if r.get("ok") == "work")
        print(f"{level:8s} {len(rs):8d} {loads:6d} {floor:11d}")
    for r in rows:
        if r.get("failed") or r.get("ok") != "work":
            why = r.get("error") or r.get("work_note") or "work unknown"
            print(f"- {r['path']}: {'fails at ' + r['failed'] if r.get('failed') else 'no floor'}: {why}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r.get("ok") in ("check", "work") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
