"""Our verdicts beside KernelBench's harness, on the same candidates: agreement, and every disagreement with its cause.

    python scripts/compare_harnesses.py --run RUN_DIR [--run RECHECK_DIR ...] --kb kb_harness.jsonl [--json OUT.json]

RUN_DIR is a `bench` run over a corpus (scripts/corpus_bench.py), whose reviews hold both rule sets' verdicts;
kb_harness.jsonl is what scripts/kernelbench_harness.py wrote (its eval phase). Only tasks both sides finished are
compared. Agreement is counted on the candidates KernelBench's harness rates correct (does ours, under
--rules kernelbench, agree?), and the other way round; each disagreement is listed with our error and flags.
A later --run replaces an earlier one's reviews of the tasks it holds (a re-check of some tasks on newer code, say);
the output says which tasks came from where.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
from collections import Counter
from pathlib import Path


def ours(run: Path) -> dict[str, dict]:
    """Task key -> the review of its (only) seed, from run.db; from a results.json (a run whose folder is gone:
    commit the summary, not the kernels), each finished task's summary in the review's shape."""
    if run.is_file():
        return from_results(run)
    db = sqlite3.connect(f"file:{run / 'run.db'}?mode=ro", uri=True)
    rows = db.execute(
        "select t.name, t.problem_path, r.result_json from reviews r join candidates c on c.id = r.candidate_id "
        "join tasks t on t.id = c.task_id order by r.id").fetchall()
    out = {}
    for name, problem, result in rows:
        level = Path(problem).parent.name.removeprefix("level")
        out[f"L{level}/{name}"] = json.loads(result)  # a redone review replaces the abandoned one
    return out


def from_results(path: Path) -> dict[str, dict]:
    out = {}
    for t in json.loads(path.read_text())["tasks"]:
        if t.get("status") != "finished" or not t.get("history"):
            continue  # pending, or no kernel to review
        last = t["history"][-1]
        correct = bool(t.get("success_kernelbench"))
        out[f"L{t['level']}/{t['name']}"] = {
            "policy": {"correct_kernelbench": correct, "correct_strict": bool(t.get("success_strict"))},
            "error_kind": None if correct else t.get("verdict"), "error": None if correct else last.get("reason"),
            "flags": t.get("flags", []), "speedup": t.get("best_speedup")}
    return out


def kernelbench(path: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["key"]: r for r in rows if r.get("phase") == "eval"}


def kb_verdict(r: dict) -> str:
    if "crashed" in r:
        return f"crash ({r['crashed']})"
    if r.get("error"):
        return "harness error"
    if r.get("returned_none"):
        return "lock/retry"
    if not r.get("compiled"):
        return "compile_error"
    return "correct" if r.get("correctness") else "incorrect"


def our_verdict(result: dict) -> str:
    policy = result.get("policy") or {}
    if policy.get("correct_kernelbench"):
        return "correct"
    return result.get("error_kind") or "incorrect"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, type=Path, action="append",
                   help="a bench run folder, or its results.json; repeat it: a later run's reviews replace an "
                        "earlier one's")
    p.add_argument("--kb", required=True, type=Path)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    mine, theirs = ours(args.run[0]), kernelbench(args.kb)
    for later in args.run[1:]:
        redone = ours(later)
        mine.update(redone)
        print(f"from {later}: {', '.join(sorted(redone)) or 'no reviews'}")
    both = sorted(set(mine) & set(theirs), key=lambda k: (k.split("/")[0], int(k.split("/")[1].split("_")[0])))
    table: dict[str, Counter] = {}
    disagreements, ratios = [], []
    for key in both:
        level = key.split("/")[0]
        m, t = mine[key], theirs[key]
        ov, kv = our_verdict(m), kb_verdict(t)
        policy = m.get("policy") or {}
        c = table.setdefault(level, Counter())
        c["tasks"] += 1
        c["kb_correct"] += kv == "correct"
        c["ours_kernelbench_correct"] += ov == "correct"
        c["ours_strict_correct"] += bool(policy.get("correct_strict"))
        c["agree_on_kb_correct"] += kv == "correct" and ov == "correct"
        c["agree"] += (kv == "correct") == (ov == "correct")
        if (kv == "correct") != (ov == "correct"):
            disagreements.append({"task": key, "kernelbench": kv, "ours": ov, "error": (m.get("error") or "")[:400],
                                  "flags": m.get("flags", []), "kb_metadata": t.get("metadata", {})})
        if kv == "correct" and ov == "correct" and t.get("speedup") and m.get("speedup"):
            ratios.append((key, m["speedup"], t["speedup"]))
    print(f"{'level':>6} {'tasks':>6} {'KB ok':>6} {'ours(kb)':>9} {'ours(strict)':>13} {'agree':>6} "
          f"{'agree on KB ok':>15}")
    total = Counter()
    for level, c in sorted(table.items()):
        total.update(c)
        print(f"{level:>6} {c['tasks']:>6} {c['kb_correct']:>6} {c['ours_kernelbench_correct']:>9} "
              f"{c['ours_strict_correct']:>13} {c['agree']:>6} {c['agree_on_kb_correct']:>8}/{c['kb_correct']:<6}")
    if total["kb_correct"]:
        print(f"agreement on candidates KernelBench's harness rates correct: "
              f"{total['agree_on_kb_correct']}/{total['kb_correct']} = "
              f"{total['agree_on_kb_correct'] / total['kb_correct']:.1%}; overall {total['agree']}/{total['tasks']}")
    for d in disagreements:
        print(f"- {d['task']}: KernelBench {d['kernelbench']}, ours {d['ours']}: {d['error'][:300]}")
    if ratios:
        quotient = [ours_s / kb_s for _, ours_s, kb_s in ratios]
        print(f"speedups on {len(ratios)} tasks both rate correct: ours / KernelBench's median "
              f"{statistics.median(quotient):.2f} (range {min(quotient):.2f}-{max(quotient):.2f})")
    if args.json:
        args.json.write_text(json.dumps({"levels": {k: dict(v) for k, v in table.items()},
                                         "disagreements": disagreements,
                                         "speedups": [{"task": k, "ours": a, "kernelbench": b} for k, a, b in ratios]},
                                        indent=1, default=str))


if __name__ == "__main__":
    main()
