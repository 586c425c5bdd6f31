"""`kernelskill bench`: many KernelBench tasks through the loop, concurrently, into one resumable run folder.

    tasks = discover(Path("~/KernelBench"), levels={"1"}, indices={1, 2, 19})
    results = run_bench(BenchRequest(problems=..., model=...))

Modules: discover (problem folders, levels, task and GPU selection), runner (the scheduler, per-task failure
isolation, resume, results.json), cluster (joining a Ray cluster for --ray), corpus (published kernels as seeds),
display (live progress). Where each evaluation runs is loop/evaluator.py's.
"""
