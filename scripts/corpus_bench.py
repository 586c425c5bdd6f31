"""`kernelskill bench` over a corpus of published kernels, in chunks that fit a short GPU lease, resumable anywhere.

    python scripts/corpus_bench.py --corpus CORPUS --run RUN_DIR --budget 480 --tar OUT/run.tar.gz [--from RUN.tar.gz]
    python scripts/corpus_bench.py ... --cuda-only      # only the kernels that build CUDA (cold reviews per minute)

Runs `kernelskill bench --problems CORPUS/problems --model corpus:CORPUS --backend cuda --seeds 1 --rounds 0
--rules kernelbench --profile off` (resuming RUN_DIR when it exists, after unpacking --from into it), stops it
with Ctrl-C after --budget seconds (the tasks in flight are redone by the next chunk), packs the run folder, its
per-review logs cut to their last 32 KB, into --tar, and prints a table: tasks per level by
verdict, under both rule sets, wall time, reviews per minute.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelskill.review.judge import UNRESOLVED_FACTOR  # noqa: E402


def bench(args, extra: list[str]) -> tuple[int, float]:
    run = Path(args.run)
    problems = args.problems or str(Path(args.corpus) / "problems")
    cmd = [sys.executable, "-m", "kernelskill.cli", "bench", "--problems", problems,
           "--model", f"corpus:{args.corpus}", "--backend", "cuda", "--seeds", "1", "--rounds", "0",
           "--rules", "kernelbench", "--profile", "off", "--parallel", str(args.parallel), "--out", str(run), *extra]
    if (run / "run.db").exists():
        cmd.append("--resume")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    print("$", " ".join(cmd), flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    deadline = start + args.budget
    while True:
        # the run folder is packed every --pack-every seconds too, so a call cut short by its lease (its time limit
        # is not known in here) still brings back every task finished before the last pack
        try:
            proc.wait(timeout=max(0.0, min(deadline - time.monotonic(), args.pack_every)))
            break
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                break
            if (run / "run.db").exists():
                pack(run, Path(args.tar), quiet=True)
    if proc.poll() is None:
        print(f"budget of {args.budget:.0f} s spent: interrupting (tasks in flight are redone on resume)", flush=True)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, time.monotonic() - start


LOG_TAIL = 32 * 1024  # bytes of each per-review log kept in the tarball: the end says how it went


def pack(run: Path, tar: Path, quiet: bool = False) -> None:
    """Pack the run folder into `tar` (written aside, then renamed: a reader never sees half a file); each per-review
    log (worker, prebuild, build) only by its last LOG_TAIL bytes, and the run store as SQLite's own consistent
    copy, so a pack made while the bench writes is a store `--resume` can open."""
    import io
    import sqlite3
    import tempfile

    tar.parent.mkdir(parents=True, exist_ok=True)
    part = tar.with_name(tar.name + ".part")
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(part, "w:gz") as t:
        for path in sorted(run.rglob("*")):
            arcname = str(Path(run.name) / path.relative_to(run))
            if path.name in ("run.db-wal", "run.db-shm", "run.db-journal"):
                continue  # in the copy below
            if path.name == "run.db" and path.is_file():
                copy = Path(scratch) / "run.db"
                with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as src, sqlite3.connect(copy) as dst:
                    src.backup(dst)
                t.add(str(copy), arcname)
            elif path.is_file() and "reviews" in path.relative_to(run).parts and path.suffix in (".log", ".txt"):
                data = path.read_bytes()[-LOG_TAIL:]
                info = t.gettarinfo(str(path), arcname)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
            elif path.is_file() or path.is_dir():
                t.add(str(path), arcname, recursive=False)
    os.replace(part, tar)
    if not quiet:
        print(f"packed {run} into {tar} ({tar.stat().st_size / 1e6:.1f} MB)", flush=True)


def table(run: Path, wall: float) -> dict:
    results = json.loads((run / "results.json").read_text())
    rows: dict[str, Counter] = {}
    reviews = 0
    for t in results["tasks"]:
        c = rows.setdefault(t["level"], Counter())
        c["tasks"] += 1
        c[f"verdict:{t.get('verdict') or t['status']}"] += 1
        c["kernelbench_correct"] += bool(t.get("success_kernelbench"))
        c["strict_correct"] += bool(t.get("success_strict"))
        reviews += len([h for h in t.get("history", []) if h.get("label")])
    verdicts = sorted({k for c in rows.values() for k in c if k.startswith("verdict:")})
    head = ["level", "tasks", "kernelbench ok", "strict ok", *[v.removeprefix("verdict:") for v in verdicts]]
    print("  ".join(f"{h:>14}" for h in head))
    for level, c in sorted(rows.items()):
        print("  ".join(f"{x:>14}" for x in [level, c["tasks"], c["kernelbench_correct"], c["strict_correct"],
                                              *[c[v] for v in verdicts]]))
    o = results["overall"]
    print(f"overall: success (kernelbench) {o.get('success_kernelbench')}, strict {o.get('success_strict')}, "
          f"mean speedup {o.get('speedup_mean')}, this chunk {wall:.0f} s, {reviews} reviews in the run")
    stages = Counter()
    for t in results["tasks"]:
        stages.update(t.get("stage_seconds") or {})
    busy = sum(stages[k] for k in ("verify", "time", "profile"))
    print(f"stages over the run's reviews: verify+time+profile {busy:.0f} s (the GPU's share of {wall:.0f} s of this "
          f"chunk: {busy / wall:.0%} where the run is this chunk alone), gpu_wait {stages['gpu_wait']:.0f} s, prebuild "
          f"{stages['prebuild']:.0f} s, review_wall {stages['review_wall']:.0f} s")
    print(f"the GPU held by reviews (gpu_held: from taking the device to giving it back) {stages['gpu_held']:.0f} s, "
          f"{stages['gpu_held'] / wall:.0%} of this chunk; {60 * reviews / wall:.1f} reviews a minute")
    compiled = compile_baseline(run)
    if compiled:
        print(f"compile baseline: {compiled['tasks']} tasks timed beside torch.compile, median speedup vs compile "
              f"{compiled['median_vs_compile']:.3g}x; torch.compile's first call in the reviews: median "
              f"{compiled['median_first_call_s']:.1f} s, {compiled['graphs_loaded']} graphs loaded from the warmed "
              f"cache, {compiled['graphs_compiled']} compiled")
    return {"levels": {k: dict(v) for k, v in rows.items()}, "wall_s": wall, "reviews": reviews,
            "stages": {k: round(v, 1) for k, v in stages.items()},
            "compile_baseline": compiled}


def compile_baseline(run: Path) -> dict | None:
    """What --baseline compile gave: tasks with a speedup vs torch.compile, and what the compile's first call cost in
    the reviews (`timing.compile_warmup`: did the warm-up's cache serve them?). None without a baseline."""
    import sqlite3

    tasks = json.loads((run / "results.json").read_text())["tasks"]
    vs = [t["speedup_vs_compile"] for t in tasks if t.get("speedup_vs_compile")]
    db = sqlite3.connect(f"file:{run / 'run.db'}?mode=ro", uri=True)
    warm = [w for (text,) in db.execute("select result_json from reviews")
            if (w := (json.loads(text).get("timing") or {}).get("compile_warmup"))]
    db.close()
    if not vs and not warm:
        return None
    return {"tasks": len(vs), "median_vs_compile": statistics.median(vs) if vs else float("nan"),
            "median_first_call_s": statistics.median(w["seconds"] for w in warm) if warm else float("nan"),
            "graphs_loaded": sum(w.get("fxgraph_cache_hit") or 0 for w in warm),
            "graphs_compiled": sum(w.get("fxgraph_cache_miss") or 0 for w in warm)}


def with_kernels(corpus: Path, extra: list[str]) -> list[str]:
    """The bench options with `--tasks` narrowed to the tasks the corpus has a kernel for (a task without one ends
    with "no kernel" at once, but `--baseline compile` would still warm its torch.compile). Needs one `--level`."""
    levels = [extra[i + 1] for i, a in enumerate(extra[:-1]) if a == "--level"]
    if len(levels) != 1 or "," in levels[0]:
        raise SystemExit("--with-kernels needs exactly one level among the bench options (-- --level N)")
    from kernelskill.bench.discover import parse_indices
    from kernelskill.llm.corpus import read_index

    wanted = set().union(*(parse_indices(extra[i + 1]) or set() for i, a in enumerate(extra[:-1]) if a == "--tasks"))
    keep = [e.index for e in read_index(corpus).entries if e.level == levels[0] and e.kernel
            and e.index is not None and (not wanted or e.index in wanted)]
    if not keep:
        raise SystemExit(f"the corpus has no kernel for level {levels[0]}" + (" among --tasks" if wanted else ""))
    rest = [a for i, a in enumerate(extra) if a != "--tasks" and (i == 0 or extra[i - 1] != "--tasks")]
    return [*rest, "--tasks", ",".join(map(str, sorted(keep)))]


def cuda_only(corpus: Path, into: Path) -> Path:
    """A copy of the corpus (its index and the problems it names) with only the kernels that build CUDA through
    `load_inline`: the cold builds' workload, without the PyTorch-only kernels that need no build."""
    index = json.loads((corpus / "corpus.json").read_text())
    keep = [e for e in index["entries"] if e.get("kernel") and e.get("problem")
            and "load_inline(" in (corpus / e["kernel"]).read_text(errors="replace")]
    for e in keep:
        for key in ("kernel", "problem"):
            (into / e[key]).parent.mkdir(parents=True, exist_ok=True)
            (into / e[key]).write_bytes((corpus / e[key]).read_bytes())
    (into / "corpus.json").write_text(json.dumps({**index, "entries": keep}, indent=1))
    print(f"{len(keep)} of {len(index['entries'])} tasks build CUDA through load_inline: benched from {into}", flush=True)
    return into


def this_chunk(run: Path, since: str, wall: float) -> dict:
    """This chunk's own reviews (a resumed run's table counts the earlier chunks' too): how many, per minute, the
    GPU's hold per review, and how many timings the judge did not confirm (judge.bound_timing)."""
    import sqlite3

    with sqlite3.connect(run / "run.db") as db:
        rows = db.execute("SELECT stage_seconds_json, result_json FROM reviews WHERE created_at >= ?",
                          (since,)).fetchall()
    held = [s["gpu_held"] for s in (json.loads(r[0] or "{}") for r in rows) if "gpu_held" in s]
    batches = [b for b in (json.loads(r[1] or "{}").get("judge_batch") for r in rows) if b]
    out = {"reviews": len(rows), "per_minute": round(60 * len(rows) / wall, 2), "gpu_held_s": round(sum(held), 1),
           "gpu_held_median_s": round(statistics.median(held), 3) if held else None,
           "gpu_held_mean_s": round(statistics.mean(held), 3) if held else None,
           "judged_batches": len(batches), "unconfirmed": sum(not b.get("confirmed", True) for b in batches),
           # confirmed claims the batch would have confirmed UNRESOLVED_FACTOR times smaller too (timing_unresolved)
           "unresolved": sum(b.get("confirmed", False) and "fastest_confirmable_us" in b
                             and b["claimed_us"] > UNRESOLVED_FACTOR * b["fastest_confirmable_us"] for b in batches)}
    print(f"this chunk: {out['reviews']} reviews in {wall:.0f} s, {out['per_minute']} a minute; GPU held "
          f"{out['gpu_held_s']} s ({out['gpu_held_s'] / wall:.0%}), per review median {out['gpu_held_median_s']} s, "
          f"mean {out['gpu_held_mean_s']} s; the judge did not confirm the runner's timing in {out['unconfirmed']} "
          f"of {out['judged_batches']} batches, and could not tell it from one {UNRESOLVED_FACTOR:g}x faster in "
          f"{out['unresolved']}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--problems", default=None, help="the problems to bench (default: the corpus's own references); "
                   "a KernelBench checkout of another revision gets each task's kernel by name")
    p.add_argument("--from", dest="from_tar", default=None, help="a packed run folder to continue")
    p.add_argument("--tar", required=True)
    p.add_argument("--budget", type=float, default=480)
    p.add_argument("--parallel", type=int, default=8)
    p.add_argument("--pack-every", type=float, default=60.0, help="seconds between packs while the bench runs")
    p.add_argument("--with-kernels", action="store_true",
                   help="only the tasks the corpus has a kernel for (needs one --level among the bench options)")
    p.add_argument("--cuda-only", action="store_true",
                   help="only the tasks whose kernel calls load_inline (a copy of the corpus beside --run)")
    p.add_argument("extra", nargs="*", help="more bench options after --, e.g. --level 1 --baseline compile")
    args = p.parse_args()
    run = Path(args.run)
    if args.from_tar:
        with tarfile.open(args.from_tar) as t:
            t.extractall(run.parent, filter="data")
        print(f"unpacked {args.from_tar} into {run.parent}", flush=True)
    if args.cuda_only:
        args.corpus = str(cuda_only(Path(args.corpus), run.with_name(run.name + "-corpus")))
    extra = with_kernels(Path(args.corpus), args.extra) if args.with_kernels else args.extra
    since = datetime.now(timezone.utc).isoformat()
    code, wall = bench(args, extra)
    print(f"bench exited with {code} after {wall:.0f} s", flush=True)
    pack(run, Path(args.tar))
    if (run / "results.json").exists():
        summary = table(run, wall)
        summary["chunk"] = this_chunk(run, since, wall)
        tar = Path(args.tar)
        tar.with_name(tar.name.removesuffix(".tar.gz") + ".json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
