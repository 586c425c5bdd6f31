#!/usr/bin/env python
"""Capture the decision benchmark on a GPU: Nsight Compute raw CSVs, PyTorch-profiler run features and the
problem's minimum work for classic and LLM-written kernels, with a manifest `kernelskill memory bench` reads.

Run on an H200 (ncu on PATH, counters readable), from the repository with kernelskill importable:

    python scripts/capture_decision_bench.py --out /tmp/dbench --from-run RUNS/bench-l1 --llm DIR
    kernelskill memory bench /tmp/dbench/decision_bench.yaml

Kernels: the classic cases of scripts/decision_bench_cases.py (--only NAME... picks some), plus real LLM-written
kernels: --llm DIR (one folder per kernel: problem.py = the reference, candidate.py = ModelNew, optional
labels.yaml {expert: [...], why: ..., source: ...}) and --from-run RUN_DIR (correct but slow candidates of a
finished `kernelskill optimize`/`bench` run: speedup below --slow-below, at most --max-per-run).

Phases (the whole run has a time budget, --budget-s, default 470 s; cases that would exceed it are skipped and
listed - run again with --only / --no-classic for the rest; an estimate, not yet measured: the 13 classic cases
take ~6 minutes, most of it ncu's ~2.5 s of replay per profiled launch):
  1. CPU, --jobs in parallel: write OUT/<case>/problem.py + candidate.py, count each problem's FLOPs and bytes on
     the meta device (kernelskill.review.work) and build the CUDA extensions (load_inline, into one
     TORCH_EXTENSIONS_DIR), so nothing compiles while the GPU is being measured;
  2. GPU, one case at a time: kernelskill.memory.profiling.run_profile - a PyTorch-profiler run (launches and
     time per forward), then `ncu --set full --clock-control none --profile-from-start off --launch-count N`
     on one warm forward, exported with `ncu --import ... --csv --page raw`.

Written to OUT: <case>/{problem.py, candidate.py, profile/{ncu_raw.csv, run_features.json, *.log, driver}},
decision_bench.yaml (labelled kernels), to_label.yaml (captured kernels without expert labels, with the policy's
decision for a curator to judge) and capture.json (environment, per-case status, seconds, notes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decision_bench_cases import CASES  # noqa: E402

DECISION_DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "decision"  # the real LLM kernels' sets
DEFAULT_BUDGET_S = 470.0  # under 8 minutes, phases 1 and 2 together
MIN_CASE_S = 25.0  # a case needs at least this much budget left to be started
# ncu launches profiled per LLM-written kernel: ~2.5 s each under --set full; the profiler still sees every launch
LLM_LAUNCHES = 4


@dataclass
class Kernel:
    """One kernel to capture: the classic cases and the LLM-written ones alike."""

    name: str
    kind: str  # "classic" | "llm"
    description: str
    reference: str
    candidate: str
    expert: list[str] = field(default_factory=list)  # empty: to be labelled by a curator
    why: str = ""
    source: str = ""
    launch_count: int = 8


@dataclass
class Outcome:
    name: str
    status: str = "skipped"
    seconds: float = 0.0
    ncu_status: str = ""
    notes: list[str] = field(default_factory=list)
    problem: dict | None = None


def classic_kernels(only: list[str] | None) -> list[Kernel]:
    return [Kernel(c.name, "classic", c.description, c.reference, c.candidate, list(c.expert), c.why,
                   "scripts/decision_bench_cases.py", c.launch_count)
            for c in CASES if not only or c.name in only]  # fmt: skip


def llm_kernels_from_dir(root: Path) -> list[Kernel]:
    """One folder per kernel: problem.py, candidate.py, optional labels.yaml."""
    import yaml

    found = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        problem, candidate = d / "problem.py", d / "candidate.py"
        if not (problem.is_file() and candidate.is_file()):
            continue
        labels = yaml.safe_load((d / "labels.yaml").read_text()) if (d / "labels.yaml").is_file() else {}
        found.append(Kernel(f"llm_{d.name}", "llm", labels.get("description", f"LLM-written kernel {d.name}"),
                            problem.read_text(), candidate.read_text(), list(labels.get("expert", [])),
                            labels.get("why", ""), labels.get("source", str(d)),
                            int(labels.get("launch_count", LLM_LAUNCHES))))  # fmt: skip
    return found


def llm_kernels_from_run(run_dir: Path, slow_below: float, limit: int) -> list[Kernel]:
    """Correct candidates of a finished run that are slower than eager by the factor `slow_below`, slowest first."""
    from kernelskill.store import RunStore

    store = RunStore.open(run_dir)
    try:
        run = store.latest_run()
        picked = []
        for task in store.tasks(run.id) if run else []:
            for c in store.candidates(task.id):
                review = store.review_of(c.id)
                if review is not None and review.correct and review.speedup is not None and review.speedup < slow_below:
                    picked.append((review.speedup, task, c))
        picked.sort(key=lambda p: p[0])
        return [Kernel(f"run_{_safe(task.name)}_{_safe(c.label)}", "llm",
                       f"{task.name} {c.label}: correct, {speedup:.3g}x of eager ({run.model})", task.problem_source,
                       c.source, source=f"{run_dir} task {task.name} candidate {c.label} (run {run.id})",
                       launch_count=LLM_LAUNCHES)
                for speedup, task, c in picked[:limit]]  # fmt: skip
    finally:
        store.close()


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name).strip("_")[:60]


# ---- phase 1: files, problem work, CUDA builds ----------------------------------------------------------------------


def prepare(k: Kernel, out: Path, python: str, ext_dir: Path, timeout: float) -> list[str]:
    """Write the case's files, count its work and build its extension; returns notes (problems found)."""
    from kernelskill.review.work import measure_problem_work

    case = out / k.name
    case.mkdir(parents=True, exist_ok=True)
    (case / "problem.py").write_text(k.reference)
    (case / "candidate.py").write_text(k.candidate)
    notes = []
    work = measure_problem_work(case / "problem.py", timeout_s=timeout)
    (case / "problem_work.json").write_text(work.model_dump_json(indent=2))
    if work.flops is None:
        notes.append(f"problem work unknown: {work.note}")
    if "load_inline" in k.candidate:
        problem = build_extensions(python, case / "candidate.py", _env(ext_dir), timeout)
        notes += [problem] if problem else []
    return notes


def build_extensions(python: str, candidate: Path, env: dict[str, str], timeout: float) -> str | None:
    """Import the candidate once in a child (its load_inline builds land in env's TORCH_EXTENSIONS_DIR); None when
    it built, else what went wrong, in one line."""
    try:
        done = subprocess.run(build_command(python, candidate), capture_output=True, text=True, timeout=timeout,
                              env=env)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"CUDA build did not finish within {timeout:.0f} s"
    if done.returncode != 0:
        return f"CUDA build failed: {(done.stderr.strip().splitlines() or ['?'])[-1][:300]}"
    return None


def build_command(python: str, candidate: Path) -> list[str]:
    """Import the candidate once: load_inline compiles into TORCH_EXTENSIONS_DIR, later runs load the cache."""
    code = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('c', sys.argv[1]); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m)")  # fmt: skip
    return [python, "-c", code, str(candidate)]


def _env(ext_dir: Path) -> dict[str, str]:
    import os

    return {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext_dir), "PYTHONUNBUFFERED": "1"}


def hand_to_sandbox_user(ext_dir: Path) -> None:
    """Phase 1 built as this user; the profiles run sandboxed, as the sandbox's unprivileged user when this one is
    root, and torch takes a lock file in each extension's folder before loading it: that user must own the tree."""
    import os

    from kernelskill.review.confine import SANDBOX_GID, SANDBOX_UID

    if os.geteuid() != 0:
        return
    for root, dirs, files in os.walk(ext_dir):
        for name in (root, *(os.path.join(root, n) for n in dirs + files)):
            os.chown(name, SANDBOX_UID, SANDBOX_GID, follow_symlinks=False)


# ---- phase 2: profile on the GPU -------------------------------------------------------------------------------------


def capture(k: Kernel, out: Path, ncu: str, python: str, ext_dir: Path, timeout: float) -> tuple[str, list[str]]:
    from kernelskill.profiling.run import ProfileSettings, run_profile

    case = out / k.name
    settings = ProfileSettings(ncu=ncu, python=python, run_timeout_s=min(timeout, 120.0), ncu_timeout_s=timeout,
                               max_kernel_launches=k.launch_count, keep_dir=case / "profile",
                               env={"TORCH_EXTENSIONS_DIR": str(ext_dir)})  # fmt: skip
    run = run_profile(case / "problem.py", case / "candidate.py", settings)
    notes = list(run.log)
    if run.profiler_note:
        notes.append(f"profiler: {run.profiler_note}")
    if run.ncu_note:
        notes.append(f"ncu: {run.ncu_note}")
    return run.ncu_status, notes


# ---- the manifest ----------------------------------------------------------------------------------------------------


def manifest_entry(k: Kernel, out: Path) -> dict:
    case = out / k.name
    entry: dict = {"id": k.name, "kind": k.kind, "code": f"{k.name}/candidate.py"}
    if (case / "profile" / "ncu_raw.csv").is_file():
        entry["metrics"] = f"{k.name}/profile/ncu_raw.csv"
    if (case / "profile" / "run_features.json").is_file():
        entry["run_features"] = f"{k.name}/profile/run_features.json"
    work = json.loads((case / "problem_work.json").read_text()) if (case / "problem_work.json").is_file() else {}
    if work.get("flops") is not None and work.get("bytes") is not None:
        entry["problem"] = {"flops": work["flops"], "bytes": work["bytes"], "precision": work["precision"]}
    entry.update({"expert": k.expert, "why": k.why, "source": k.source or k.description})
    return entry


def write_manifests(kernels: list[Kernel], outcomes: dict[str, Outcome], out: Path, gpu: str) -> tuple[Path, Path]:
    import yaml

    captured = [k for k in kernels if outcomes[k.name].status == "ok"]
    labelled = [manifest_entry(k, out) for k in captured if k.expert]
    unlabelled = [manifest_entry(k, out) | {"description": k.description} for k in captured if not k.expert]
    bench, to_label = out / "decision_bench.yaml", out / "to_label.yaml"
    header = "# written by scripts/capture_decision_bench.py; paths are relative to this folder\n"
    bench.write_text(header + yaml.safe_dump({"description": f"decision bench captured on {gpu}", "gpu": gpu,
                                              "kernels": labelled}, sort_keys=False, width=120))  # fmt: skip
    to_label.write_text("# captured kernels without expert labels: add expert + why, then move them into "
                        "decision_bench.yaml\n" + yaml.safe_dump({"kernels": unlabelled}, sort_keys=False, width=120))
    return bench, to_label


def _fixture_copy(fixtures: list[Path] | None, kernel_id: str, name: str, src: Path) -> Path | None:
    """The repository's own copy of a captured LLM kernel's `name` (candidate.py, problem.py): in one of the fixture
    sets `fixtures`, the folder <set>/<folder> whose file is byte for byte the captured one (kernel_id llm_<folder>)."""
    if not fixtures or not kernel_id.startswith("llm_") or not src.is_file():
        return None
    for root in fixtures:
        mine = root / kernel_id.removeprefix("llm_") / name
        if mine.is_file() and mine.read_bytes() == src.read_bytes():
            return mine
    return None


def fixture_sets(root: Path = DECISION_DATA) -> list[Path]:
    """The repository's sets of LLM kernel fixtures: the folders under tests/data/decision."""
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def merge_into(out: Path, dest: Path, fixtures: list[Path] | None = None) -> list[str]:
    """Copy the captured kernels of `out`'s decision_bench.yaml into the seeded folder `dest` (tests/data/ncu/h200)
    as <id>.csv, <id>.py, <id>.problem.py and <id>.run_features.json, and append their entries to its
    decision_bench.yaml; ids it already has are left alone. Returns the ids added. An LLM kernel that is one of the
    repository's fixtures (`fixtures`, the sets under tests/data/decision: the same bytes) is not copied again: its entry's
    `code` points at the fixture, and its problem.py is the fixture's."""
    import os

    import yaml

    captured = yaml.safe_load((out / "decision_bench.yaml").read_text()).get("kernels") or []
    bench = dest / "decision_bench.yaml"
    have = {k["id"] for k in (yaml.safe_load(bench.read_text()).get("kernels") or [])} if bench.is_file() else set()
    added, entries = [], []
    for k in captured:
        if k["id"] in have or not k.get("metrics"):
            continue
        i, case = k["id"], out / k["id"]
        files = {"metrics": (case / "profile" / "ncu_raw.csv", f"{i}.csv"), "code": (case / "candidate.py", f"{i}.py"),
                 "run_features": (case / "profile" / "run_features.json", f"{i}.run_features.json")}
        entry = {"id": i, "kind": k["kind"]}
        for key, (src, name) in files.items():
            mine = _fixture_copy(fixtures, i, "candidate.py", src) if key == "code" else None
            if mine is not None:
                entry[key] = Path(os.path.relpath(mine, dest)).as_posix()
            elif src.is_file():
                shutil.copy(src, dest / name)
                entry[key] = name
        if (case / "problem.py").is_file() and _fixture_copy(fixtures, i, "problem.py", case / "problem.py") is None:
            shutil.copy(case / "problem.py", dest / f"{i}.problem.py")
        entry.update({key: k[key] for key in ("problem", "expert", "why", "source") if key in k})
        entries.append(entry)
        added.append(i)
    if entries:
        block = yaml.safe_dump(entries, sort_keys=False, width=116)
        text = bench.read_text().rstrip("\n") + "\n" if bench.is_file() else "kernels:\n"
        bench.write_text(text + "\n".join("  " + line if line else line for line in block.splitlines()) + "\n")
    return added


# ---- main ------------------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--out", type=Path, help="output folder (created); required unless --list")
    p.add_argument("--only", nargs="+", choices=[c.name for c in CASES], help="capture only these classic cases")
    p.add_argument("--no-classic", action="store_true", help="capture only the LLM-written kernels")
    p.add_argument("--llm", type=Path, help="folder of LLM-written kernels (problem.py, candidate.py, labels.yaml)")
    p.add_argument("--from-run", type=Path, action="append", default=[], help="run folder (repeatable): its "
                   "correct but slow candidates")  # fmt: skip
    p.add_argument("--slow-below", type=float, default=0.5, help="--from-run: speedup vs eager below this")
    p.add_argument("--max-per-run", type=int, default=10, help="--from-run: at most this many kernels per run")
    p.add_argument("--ncu", default="ncu", help="ncu executable (default: ncu on PATH)")
    p.add_argument("--python", default=sys.executable, help="python that runs the kernels (default: this one)")
    p.add_argument("--gpu", default="NVIDIA H200", help="GPU name written to the manifest (for the floors)")
    p.add_argument("--jobs", type=int, default=8, help="parallel CPU jobs in phase 1 (default 8)")
    p.add_argument("--timeout-s", type=float, default=120.0, help="time limit per step (default 120)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="budget of the whole run (default 470)")
    p.add_argument("--stop-after-failures", type=int, default=3, metavar="N", help="stop profiling after N kernels "
                   "in a row failed, the rest listed as skipped (a broken setup, not N broken kernels; default 3, "
                   "0: never stop)")
    p.add_argument("--list", action="store_true", help="list the classic cases and exit")
    p.add_argument("--merge-into", type=Path, help="afterwards, add the captured kernels to this seeded folder "
                   "(e.g. tests/data/ncu/h200): files as <id>.csv/.py/.run_features.json, entries appended to its "
                   "decision_bench.yaml; with --merge-only, do only that for an earlier --out")
    p.add_argument("--merge-only", action="store_true", help="no capture: merge --out into --merge-into")
    p.add_argument("--fixtures", type=Path, action="append", help="with --merge-into: LLM kernels that are fixtures "
                   "of this set (same bytes) are referenced, not copied; repeatable (default: every set under "
                   "tests/data/decision)")
    args = p.parse_args(argv)
    if args.merge_only and not (args.out and args.merge_into):
        p.error("--merge-only needs --out (an earlier capture) and --merge-into")
    if args.out is None and not args.list:
        p.error("--out is required")
    if args.jobs < 1 or args.budget_s <= 0 or args.timeout_s <= 0:
        p.error("--jobs, --budget-s and --timeout-s must be positive")
    if args.stop_after_failures < 0:
        p.error("--stop-after-failures must be 0 (never stop) or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for c in CASES:
            print(f"{c.name:<34} {c.description}  -> expert: {', '.join(c.expert)}")
        return 0
    if args.merge_only:
        added = merge_into(args.out, args.merge_into, args.fixtures or fixture_sets())
        print(f"added {len(added)} kernels to {args.merge_into / 'decision_bench.yaml'}: {', '.join(added) or '-'}")
        return 0
    deadline = time.monotonic() + args.budget_s
    ncu = shutil.which(args.ncu) or (args.ncu if Path(args.ncu).is_file() else None)
    if ncu is None:
        print(f"error: ncu not found ({args.ncu!r}); put Nsight Compute on PATH or pass --ncu", file=sys.stderr)
        return 2
    kernels = [] if args.no_classic else classic_kernels(args.only)
    if args.llm is not None:
        kernels += llm_kernels_from_dir(args.llm)
    for run_dir in args.from_run:
        kernels += llm_kernels_from_run(run_dir, args.slow_below, args.max_per_run)
    if not kernels:
        print("error: no kernels to capture", file=sys.stderr)
        return 2
    out: Path = args.out
    ext_dir = out / "torch_extensions"
    ext_dir.mkdir(parents=True, exist_ok=True)
    outcomes = {k.name: Outcome(k.name) for k in kernels}
    print(f"phase 1: {len(kernels)} kernels, {args.jobs} jobs: files, problem work, CUDA builds", flush=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        limit = max(1.0, min(args.timeout_s, deadline - time.monotonic()))
        for k, notes in zip(kernels, pool.map(lambda k: prepare(k, out, args.python, ext_dir, limit), kernels),
                            strict=True):  # fmt: skip
            outcomes[k.name].notes += notes
    hand_to_sandbox_user(ext_dir)
    print("phase 2: profiling on the GPU, one kernel at a time", flush=True)
    failed_in_a_row = 0
    for k in kernels:
        o = outcomes[k.name]
        remaining = deadline - time.monotonic()
        if remaining < MIN_CASE_S:
            o.status = f"skipped (budget of {args.budget_s:.0f} s used)"
            continue
        if args.stop_after_failures and failed_in_a_row >= args.stop_after_failures:
            o.status = f"skipped ({failed_in_a_row} failures in a row)"
            continue
        t0 = time.monotonic()
        o.ncu_status, notes = capture(k, out, ncu, args.python, ext_dir, min(args.timeout_s, remaining - 5))
        o.notes += notes
        o.seconds = round(time.monotonic() - t0, 1)
        o.status = "ok" if o.ncu_status == "ok" else f"ncu {o.ncu_status}"
        failed_in_a_row = 0 if o.status == "ok" else failed_in_a_row + 1
        print(f"[{k.name}] {o.status} in {o.seconds:.1f} s", flush=True)
        if o.status != "ok":  # the whole reason, where the setup's fault shows first
            print("\n".join(f"    {line}" for note in o.notes for line in note.splitlines()[-12:]), flush=True)
    bench, to_label = write_manifests(kernels, outcomes, out, args.gpu)
    from capture_ncu import environment  # the same probes (ncu, GPU, torch, triton versions)

    (out / "capture.json").write_text(json.dumps({"environment": environment(ncu, args.python),
                                                  "outcomes": [asdict(o) for o in outcomes.values()]}, indent=2))
    for o in outcomes.values():
        print(f"{o.name:<40} {o.status:<28} {o.seconds:>6.1f} s" + (f"  ({o.notes[-1][:80]})" if o.notes and
                                                                      o.status != "ok" else ""))  # fmt: skip
    print(f"wrote {bench}, {to_label}, {out / 'capture.json'}; score with: kernelskill memory bench {bench}")
    if args.merge_into is not None:
        added = merge_into(out, args.merge_into, args.fixtures or fixture_sets())
        print(f"added {len(added)} kernels to {args.merge_into / 'decision_bench.yaml'}: {', '.join(added) or '-'}")
    return 0 if all(o.status == "ok" for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
