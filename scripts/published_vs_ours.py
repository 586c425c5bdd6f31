"""A corpus's own published speedups beside the ones our bench measured for the same kernels, task by task.

    python scripts/published_vs_ours.py --results RUN/results.json [--results RUN2/results.json ...] --corpus CORPUS
        [--out TABLE.md]

CORPUS is a `kernelskill corpus import` folder: its corpus.json keeps each record's numeric fields (`meta`), such as
CUDA-L1's `score_default` (its speedup over eager PyTorch) and `score_torch_compile_default` (over torch.compile).
RESULTS is a `bench` run over that corpus (results.json); give it several times for runs over parts of it (one per
level, say), a later run's task replacing an earlier one's. Every corpus task is listed: with both figures and their
ratio, or with why one side has none (no kernel published, our verdict). Then per level: how many have both, the
median and geometric mean of ours / published, and the share within 10%. The two were measured on different GPUs
and harnesses when the corpus says so (CUDA-L1: an H100); the ratio says how far a published figure carries, not
which is right.
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

PAIRS = (("eager", "best_speedup", "score_default"), ("compile", "speedup_vs_compile", "score_torch_compile_default"))


def rows(results: dict, corpus: CorpusIndex) -> list[dict]:
    """One row per corpus task, joined to our task of the same level and index (None where we have none)."""
    ours = {(str(t["level"]), t["index"]): t for t in results["tasks"]}
    out = []
    for e in sorted(corpus.entries, key=lambda e: (e.level, e.index or 0)):
        t = ours.get((e.level, e.index))
        row = {"task": f"L{e.level}/{e.name}", "level": e.level, "published_kernel": bool(e.kernel),
               "verdict": (t or {}).get("verdict") or ((t or {}).get("status") if t else "not in the run"),
               "correct": bool(t and (t.get("success_kernelbench") or t.get("success")))}
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
    return "ours: not measured" + (" (run without --baseline compile)" if label == "compile" else "")


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
    """The tasks of several results.json, a later file's task replacing an earlier one's of the same level and index."""
    tasks: dict[tuple, dict] = {}
    for path in paths:
        for t in json.loads(path.read_text())["tasks"]:
            tasks[(str(t["level"]), t["index"])] = t
    return {"tasks": list(tasks.values())}


def render(table: list[dict], results_path: str, corpus: CorpusIndex) -> str:
    fmt = lambda x: f"{x:.3g}" if x else "-"  # noqa: E731
    out = [f"# Published speedups beside ours: {corpus.source}", "",
           f"From `{results_path}` and the corpus's own figures (`scripts/published_vs_ours.py`). Ratio = ours / "
           "published; a ratio of 1 means the published figure carried over to this GPU and harness.", ""]
    for label, _, their_key in PAIRS:
        out += [f"## Over {'eager PyTorch' if label == 'eager' else 'torch.compile'} (published: `{their_key}`)", "",
                "| level | tasks | both figures | median ratio | geomean ratio | within 10% |",
                "| --- | ---: | ---: | ---: | ---: | ---: |", *summary(table, label), ""]
    out += ["## Every task", "", "| task | ours (eager) | published | ratio | ours (compile) | published | ratio | "
            "why a figure is missing |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in table:
        missing = sorted({why_missing(r, label) for label, _, _ in PAIRS if r[f"ratio_{label}"] is None})
        out.append(f"| {r['task']} | {fmt(r['ours_eager'])} | {fmt(r['published_eager'])} | {fmt(r['ratio_eager'])} "
                   f"| {fmt(r['ours_compile'])} | {fmt(r['published_compile'])} | {fmt(r['ratio_compile'])} "
                   f"| {'; '.join(missing)} |")
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", required=True, type=Path, action="append", help="a bench run's results.json; "
                   "repeat it for runs over parts of the corpus")
    p.add_argument("--corpus", required=True, type=Path)
    p.add_argument("--out", type=Path, help="write the table here (markdown); default: print it")
    args = p.parse_args()
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
