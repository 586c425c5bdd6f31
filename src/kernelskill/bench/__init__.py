"""`kernelskill bench`: many KernelBench tasks through the loop, concurrently, into one resumable run folder.

    tasks = discover(Path("~/KernelBench"), levels={"1"}, indices={1, 2, 19})
    results = run_bench(BenchRequest(problems=..., model=...))

Modules: discover (problem folders, levels, task selection), gpus (one evaluation per GPU at a time), runner (the
scheduler, per-task failure isolation, resume, results.json), display (live progress).
"""
