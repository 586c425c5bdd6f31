"""Profiling a candidate on the GPU: Nsight Compute's metrics and the PyTorch profiler's kernels of one forward.

This package only measures; what the measurements mean is the long-term memory's business (kernelskill.memory).

    run.py      run_profile: the driver under ncu and under the PyTorch profiler, each step with a time limit
    driver.py   the program profiled (python -m kernelskill.profiling.driver), confined like a review worker
    ncu.py      ncu's raw CSV -> per-kernel metrics in canonical units (NcuReport)
    summary.py  the PyTorch profiler's summary and the ncu run's status
"""
