"""A corpus's own published speedups beside the ones our bench measured for the same kernels, task by task.

    python scripts/published_vs_ours.py --results RUN/results.json [--results RUN2/results.json ...] --corpus CORPUS
        [--out TABLE.md] [--fill-host-paced]

CORPUS is a `kernelskill corpus import` folder: its corpus.json keeps each record's numeric fields (`meta`), such as
CUDA-L1's `score_default` (its speedup over eager PyTorch) and `score_torch_compile_default` (over torch.compile).
RESULTS is a `bench` run over that corpus (results.json); give it several times for runs over parts of it (one per
level, say), a later run's task replacing an earlier one's. Every corpus task is listed: with both figures and their
ratio, or with why one side has none (no kernel published, our verdict). Then per level: how many have both, the
median and geometric mean of ours / published, and the share within 10%. The two were measured on different GPUs
and harnesses when the corpus says so (CUDA-L1: an H100); the ratio says how far a published figure carries, not
which is right.

Against torch.compile there are two of ours: on the GPU (`speedup_vs_compile`: what the robust protocol times) and at
the pace of calls made back to back from Python (`speedup_vs_compile_host_paced`), where a compiled module's
per-call host work can set the pace. A table by the compiled forward's GPU time sets both beside the published one.
Runs made before bench recorded the second figure have it in their run.db: `--fill-host-paced` computes it there
for a results.json that sits in its run folder, and writes it into that results.json.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kernelskill.llm.corpus import CorpusIndex, read_index  # noqa: E402

PAIRS = (("eager", "best_speedup", "score_default"), ("compile", "speedup_vs_compile", "score_torch_compile_default"),
         ("compile_paced", "speedup_vs_compile_host_paced", "score_torch_compile_default"))
HEADINGS = {"eager": "eager PyTorch", "compile": "torch.compile, on the GPU",
            "compile_paced": "torch.compile, at the pace of back-to-back calls"}
SIZES = (("under 50 us", 0.0, 0.05), ("50-500 us", 0.05, 0.5), ("over 500 us", 0.5, math.inf))


def rows(results: dict, corpus: CorpusIndex) -> list[dict]:
    """One row per corpus task, joined to our task of the same level and index (None where we have none)."""
    ours = {(str(t["level"]), t["index"]): t for t in results["tasks"]}
    out = []
    for e in sorted(corpus.entries, key=lambda e: (e.level, e.index or 0)):
        t = ours.get((e.level, e.index))
        row = {"task": f"L{e.level}/{e.name}", "level": e.level, "published_kernel": bool(e.kernel),
               "verdict": (t or {}).get("verdict") or ((t or {}).get("status") if t else "not in the run"),
               "correct": bool(t and (t.get("success_kernelbench") or t.get("success"))),
               "compile_ms": (t or {}).get("compile_ms")}
        for label, our_key, their_key in PAIRS:
            mine = t.get(our_key) if t and row["correct"] else None
            theirs = e.meta.get(their_key)
            row[f"ours_{label}"], row[f"published_{label}"] = mine, theirs
            row[f"ratio_{label}"] = mine / theirs if mine and theirs else None
        out.append(row)
    return out


def why_missing(row: dict, label: str) -> str:
    if row[f"published_{label}"] is None:
        return "no published figure"
    if not row["published_kernel"]:
        return "no kernel published"
    if not row["correct"]:
        return f"ours: {row['verdict']}"
    if label == "compile_paced" and row["ratio_compile"] is not None:
        return "ours: no launch-paced figure (run before it was recorded)"
    return "ours: not measured" + (" (run without --baseline compile)" if label.startswith("compile") else "")


def summary(table: list[dict], label: str) -> list[str]:
    lines = []
    for level in sorted({r["level"] for r in table}):
        ratios = [r[f"ratio_{label}"] for r in table if r["level"] == level and r[f"ratio_{label}"]]
        n = sum(r["level"] == level for r in table)
        if not ratios:
            lines.append(f"| {level} | {n} | 0 | - | - | - |")
            continue
        geo = math.exp(statistics.fmean(math.log(x) for x in ratios))
        near = sum(0.9 <= x <= 1.1 for x in ratios) / len(ratios)
        lines.append(f"| {level} | {n} | {len(ratios)} | {statistics.median(ratios):.2f} | {geo:.2f} | {near:.0%} |")
    return lines


def merged(paths: list[Path]) -> dict:
    """The tasks of several results.json, a later file's task replacing an earlier one's of the same level and index,
    unless the later one is still pending and the earlier one is not (a level finished by a run over part of it)."""
    tasks: dict[tuple, dict] = {}
    for path in paths:
        for t in json.loads(path.read_text())["tasks"]:
            key = (str(t["level"]), t["index"])
            if t.get("status") == "pending" and key in tasks and tasks[key].get("status") != "pending":
                continue
            tasks[key] = t
    return {"tasks": list(tasks.values())}


def by_size(table: list[dict]) -> list[str]:
    """Per level and size of the compiled forward (our torch.compile GPU time): the median ratio of each of ours to
    the published figure, where a task has it."""
    lines = []
    for level in sorted({r["level"] for r in table}):
        for name, lo, hi in SIZES:
            sel = [r for r in table if r["level"] == level and r["compile_ms"] and lo <= r["compile_ms"] < hi]
            cells = []
            for label in ("compile", "compile_paced", "eager"):
                ratios = [r[f"ratio_{label}"] for r in sel if r[f"ratio_{label}"]]
                cells.append(f"{statistics.median(ratios):.2f} ({len(ratios)})" if ratios else "-")
            if sel:
                lines.append(f"| {level} | {name} | {len(sel)} | " + " | ".join(cells) + " |")
    return lines


def fill_host_paced(results_path: Path) -> int:
    """Fill `speedup_vs_compile_host_paced` into a results.json from its run folder's run.db (the best kernel's own
    review: torch.compile's and the kernel's GPU medians and host times, through the review's own formula), for
    tasks timed beside torch.compile that lack it. Rewrites the file; returns how many tasks were filled."""
    from kernelskill.review.paced import host_paced
    from kernelskill.store import RunStore

    results = json.loads(results_path.read_text())
    filled = 0
    with RunStore.open(results_path.parent) as store:
        for t in results["tasks"]:
            if t.get("speedup_vs_compile_host_paced") or not t.get("speedup_vs_compile") or not t.get("task_id"):
                continue
            row = store.find_task(store.latest_run().id, t["name"])
            review = store.review_of(row.best_candidate_id) if row and row.best_candidate_id else None
            timing = (review.result.get("timing") or {}) if review else {}
            host = timing.get("host_us") or {}
            if not timing.get("compiled_reference") or "compiled_reference" not in host or "candidate" not in host:
                continue
            paced, _ = host_paced(timing["compiled_reference"]["median_ms"], host["compiled_reference"] / 1e3,
                                  timing["candidate"]["median_ms"], host["candidate"] / 1e3)
            if paced:
                t["speedup_vs_compile_host_paced"] = paced
                filled += 1
    results_path.write_text(json.dumps(results, indent=1) + "\n")
    return filled


def render(table: list[dict], results_path: str, corpus: CorpusIndex) -> str:
    fmt = lambda x: f"{x:.3g}" if x else "-"  # noqa: E731
    out = [f"# Published speedups beside ours: {corpus.source}", "",
           f"From `{results_path}` and the corpus's own figures (`scripts/published_vs_ours.py`). Ratio = ours / "
           "published; a ratio of 1 means the published figure carried over to this GPU and harness.", ""]
    for label, _, their_key in PAIRS:
        out += [f"## Over {HEADINGS[label]} (published: `{their_key}`)", "",
                "| level | tasks | both figures | median ratio | geomean ratio | within 10% |",
                "| --- | ---: | ---: | ---: | ---: | ---: |", *summary(table, label), ""]
    out += ["## By the compiled forward's GPU time", "",
            "Median ours / published (tasks with both figures), by our torch.compile(Model)'s time on the GPU.", "",
            "| level | compiled forward | tasks | over torch.compile, GPU | over torch.compile, back to back | "
            "over eager |", "| --- | --- | ---: | ---: | ---: | ---: |", *by_size(table), ""]
    out += ["## Every task", "", "| task | ours (eager) | published | ratio | ours (compile) | ours (compile, back "
            "to back) | published | ratio | ratio, back to back | why a figure is missing |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in table:
        missing = sorted({why_missing(r, label) for label, _, _ in PAIRS if r[f"ratio_{label}"] is None})
        out.append(f"| {r['task']} | {fmt(r['ours_eager'])} | {fmt(r['published_eager'])} | {fmt(r['ratio_eager'])} "
                   f"| {fmt(r['ours_compile'])} | {fmt(r['ours_compile_paced'])} | {fmt(r['published_compile'])} "
                   f"| {fmt(r['ratio_compile'])} | {fmt(r['ratio_compile_paced'])} | {'; '.join(missing)} |")
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", required=True, type=Path, action="append", help="a bench run's results.json; "
                   "repeat it for runs over parts of the corpus")
    p.add_argument("--corpus", required=True, type=Path)
    p.add_argument("--out", type=Path, help="write the table here (markdown); default: print it")
    p.add_argument("--fill-host-paced", action="store_true", help="first fill the launch-paced figure over "
                   "torch.compile into each results.json from the run.db beside it (runs made before bench recorded "
                   "it)")
    args = p.parse_args()
    if args.fill_host_paced:
        for path in args.results:
            if not (path.parent / "run.db").is_file():
                sys.exit(f"--fill-host-paced: no run.db beside {path} (give the results.json inside its run folder)")
            print(f"{path}: {fill_host_paced(path)} tasks filled from {path.parent / 'run.db'}")
    corpus = read_index(args.corpus)
    table = rows(merged(args.results), corpus)
    text = render(table, "`, `".join(map(str, args.results)), corpus)
    if args.out:
        args.out.write_text(text)
        print(f"{len(table)} tasks written to {args.out}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
