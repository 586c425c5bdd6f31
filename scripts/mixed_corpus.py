"""A corpus of public CUDA kernels of every level, from two sources, for measuring cold builds and reviews.

    python scripts/mixed_corpus.py --cuda-l1 .devdata/corpus --out .devdata/mixed [--count 100]

Takes, in this order, one kernel per distinct reference program: the public kernels kept as fixtures in tests/data
(KernelBenchLeaderboard's and CUDA-L1's, with their problems; provenance in the READMEs beside them) that call
`load_inline` with CUDA sources, then CUDA-L1's kernels that call `load_inline` (a corpus from `kernelskill corpus
import h100.json`), until --count. Writes them through `kernelskill corpus import` (a JSON Lines file of records),
so `bench --model corpus:OUT --problems OUT/problems` serves each task its kernel. A fixture's task is named
`1NNN_<its folder>`; a CUDA-L1 kernel's keeps CUDA-L1's name (KernelBench's number and name), so its verdict can be set
beside KernelBench's harness's (scripts/compare_harnesses.py). Prints where each came from.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _cuda(text: str) -> bool:
    return "load_inline(" in text and "cuda_sources" in text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cuda-l1", type=Path, required=True, help="CUDA-L1's corpus (kernelskill corpus import)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--count", type=int, default=100)
    args = p.parse_args()
    from kernelskill.bench.corpus import import_corpus
    from kernelskill.llm.corpus import read_index, source_sha

    picked: list[tuple[str, str, str, str, str]] = []  # level, task name, reference, kernel, where from
    seen: set[str] = set()

    def take(level: str, name: str, reference: str, kernel: str, origin: str) -> None:
        sha = source_sha(reference)
        if sha not in seen and len(picked) < args.count:
            seen.add(sha)
            picked.append((level, name, reference, kernel, origin))

    data = ROOT / "tests" / "data"
    for path in sorted((data / "decision").glob("*/*/candidate.py")):
        name = path.parent.name  # lb_l2_059_o1_linear_swish, cl1_l1_097_cosine_loss
        problem = path.with_name("problem.py")
        parts = name.split("_")
        if problem.exists() and _cuda(path.read_text()) and len(parts) > 1 and parts[1][:1] == "l":
            take(parts[1][1:], f"{1000 + len(picked)}_{name}", problem.read_text(), path.read_text(),
                 str(path.relative_to(ROOT)))
    for kernel, problem in ((data / "public/kernelbench_leaderboard/L1_37_kernel.py",
                             data / "public/kernelbench_leaderboard/L1_37_problem.py"),):
        take("1", f"{1000 + len(picked)}_leaderboard_L1_37", problem.read_text(), kernel.read_text(),
             str(kernel.relative_to(ROOT)))
    for e in read_index(args.cuda_l1).entries:
        if e.kernel and e.problem and _cuda((args.cuda_l1 / e.kernel).read_text()):
            # CUDA-L1's own task names (KernelBench's numbers, under 100), as in KernelBench's harness's verdicts
            take(e.level, e.name, (args.cuda_l1 / e.problem).read_text(), (args.cuda_l1 / e.kernel).read_text(),
                 f"CUDA-L1 L{e.level}/{e.name}")
    with tempfile.TemporaryDirectory() as tmp:
        records, names = Path(tmp) / "records.jsonl", Path(tmp) / "names"
        with records.open("w") as f:
            for level, name, reference, kernel, _ in picked:
                (names / f"level{level}").mkdir(parents=True, exist_ok=True)
                (names / f"level{level}" / f"{name}.py").write_text(reference)  # the task's name, for the import
                f.write(json.dumps({"level": level, "task_id": int(name.split("_")[0]), "ref_code": reference,
                                    "custom_code": kernel}) + "\n")
        index = import_corpus(records, args.out, names_from=names,
                              label=f"{len(picked)} public CUDA kernels (scripts/mixed_corpus.py)")
    for entry, (*_, origin) in zip(index.entries, picked):
        print(f"L{entry.level}/{entry.name}: {origin}")
    by_level = {lvl: sum(e.level == lvl for e in index.entries) for lvl in sorted({e.level for e in index.entries})}
    print(f"{len(index.entries)} kernels in {args.out}: " + ", ".join(f"level {k}: {v}" for k, v in by_level.items()))


if __name__ == "__main__":
    main()
