"""The review worker: a process started by `sandbox.WorkerPool` that serves one review after another.

At start it imports torch, sets up the device and takes its guards' snapshots (`Session`), then says it is ready.
It reads requests (`wire.ReviewRequest`, one JSON line each) on stdin, runs the stages load → compile → verify → time
for each, and reports progress and results (`wire` messages) as JSON lines on the file descriptor named by argv[1];
the candidate's own prints go to stdout/stderr, which point at each review's log file. It announces each stage before
starting it, so the parent can enforce a time limit per stage and knows which stage a crash or a hang happened in.
After each review it says whether it is still fit to serve another: the harness's functions untouched and no thread
left behind.

- serve.py: the process (`main`: confine, bind to the parent, the session) and one review's loop (`serve`).
- session.py: what the process keeps across reviews (`Session`), the `Channel` and the `StageLog` of one review.
- stages.py: `Worker`, one review's state, all of it created up front; the load and compile stages.
- verify.py, timed.py: the verify and time stages, as functions over a `Worker`.
- candidate.py: calling the candidate and the checks after a call (threads, integrity), failures as verdicts.
- checks.py: comparing and recording without running anything (degenerate references, marginal timed outputs).
- prebuild.py: building a CUDA candidate's extensions ahead of its review, in a process without a GPU.
"""
