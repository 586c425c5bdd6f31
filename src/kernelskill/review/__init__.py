"""The Reviewer: does a candidate compile, is it correct, how fast is it against PyTorch eager, and did it cheat.

The trust boundary. Code that has run problem or candidate code is never trusted to report on it:

    judging process (reviewer.py, judge.py, verdict.py,    never imports the problem or the candidate
                     rules.py, compare.py)
        │  seeds it draws ──► files it reads back (exchange.py: no pickle), its own clock, its own deadlines
        ├── reference runner   the problem's code only; times the reference and writes its outputs, all before
        │                      any candidate code runs; then idle until the candidate runner is dead, when it
        │                      runs the batch the candidate ran (seconds apart: the same machine load); its
        │                      build and JIT caches are a set no candidate runner may write (caches.py)
        └── candidate runner   fresh per candidate, confined; its own stages are hints that can only lower the
                               verdict; then the judge's trials and a batch on seeds it learns only then; killed;
                               its caches are its source's alone, and it only reads the harness's headers

The verdict is correct only when the judge's comparisons pass; the reference's time is the reference runner's
(the candidate runner's may be at most 5% slower), and so is torch.compile(Model)'s with `--baseline compile`
(compiled and timed only there); the candidate's event time is bounded by the judge's clock over
the batch (judge.py says how), and where it is not confirmed both sides are put at their pace in that batch (on
a GPU, a claim missed by no more than a busy host's hiccup first gets a second review, fresh runners and inputs,
and the lower figure stands unless that batch confirms it); a batch far slower than its claimed pace is cut at a
limit of the judge's (verdict: timeout). While either batch runs,
the builds of later candidates are stopped (quiet.py), so a host-bound kernel's pace is not the compilers'; and on a
GPU both runners' timed work runs on one CPU the judge picks and moves them to (pinning.py, with its probe pace.py),
so the two sides' host paces are one CPU's, not each process's draw. A GPU
may hold a few reviews at once (turns.py): their untimed steps run side by side, each timed step (the reference's
timing, the runner's timing stage, the two batches) waits until no other step runs, and while it runs every other
review's runners are stopped; runners start each stage and command only when given their turn. The
verdict is one immutable object, decided once (verdict.py) from how the runner ended, the judge's report, the
speed-of-light floor and one rule set (rules.py: what `--rules strict|kernelbench` means, asked by the reviewer,
the runner's trials and the loop alike). Guards.judge=False falls back to the runner's own report, for tests only.

Why it holds: the judging process never imports problem or candidate code, so nothing can patch what it compares
or times with; a runner speaks only through files the judge parses without running anything (exchange.py) and
through the wall time the judge itself measures, never through a message taken as a claim; every deadline is the
judge's; the seeds of the judge's trials and batch exist only in the judge until the runner must answer, and the
batch's checked calls (and the positions of every other call's outputs compared) are drawn after it answered, once
its runner is dead. The batch's timed calls cannot shed
work into its untimed-to-the-microsecond parts: its input file is masked until the calls (the key comes with them),
and the digests of their outputs, said at their end, must match what is written after.

A map of the package, in the order a review goes through it:

- the reviewer (reviewer.py): `review()` and `prebuild()`, the one entry point; it runs the static checks, starts
  the two runners, has the judge (judge.py) make its trials and batch, and puts the runner's records beside the
  verdict (verdict.py, under the rule set of rules.py) in a `ReviewResult`. Where a review runs (which device,
  this machine or a cluster) is decided above this package, by kernelskill.loop.evaluator.
- static checks (static_checks.py): what is refused before anything runs (monkey-patching, frame access, threads,
  fallbacks to the reference), and what only the strict rules refuse.
- the sandbox (sandbox.py): worker processes forked by a zygote that has imported torch (zygote.py, kept per
  environment by confined.py, which also runs one-off confined children), each pid 2 under an init of
  a PID namespace of its own, with a clean environment, judge-owned time limits, logs capped as they arrive, and a
  crash or hang that costs one candidate, never the run; their confinement (confine.py, with the Linux calls in
  confine_os.py): no sockets, Landlock on the filesystem, an environment allowlist, not root, resource limits,
  a /proc and a /dev/shm of its own;
  a layer that cannot be applied stops the review. ncu and the program it profiles are confined together by
  confine_ncu.py.
- the timing CPU (pinning.py, pace.py): which CPU both runners time on, and moving every thread of a runner there
  and back from this side.
- turns (turns.py): a device shared by several reviews, untimed steps side by side, each timed step alone, every
  other review's runners stopped while it runs and its clocks paused meanwhile.
- the problem probe (probe.py): the one place problem code runs outside a review, a confined zygote child that
  checks a problem file (Model built, inputs drawn) and counts its work, once per problem source.
- the worker (worker/, wire.py): inside that process, the stages load → compile → verify → time; the typed
  request and messages between it and the reviewer (wire.py).
- guards (guards.py): what holds the verdict against an adversarial candidate at run time (integrity of the
  harness's functions, poisoned freed memory, plain output tensors, which kernels and ops a forward ran).
- comparing and timing (compare.py, timing.py, graphed.py, paced.py): outputs against the reference; do_bench-style
  timing with rotated inputs, an L2 flush and a device-wide sync, a sample's calls under 1 ms replayed from a CUDA
  graph checked against its eager calls; the figures at the launches' pace and against torch.compile(Model).
- results (results.py, render.py, logs.py): the typed result of each stage and of the review, rendered for people
  and machines, with logs trimmed to the lines that matter.
- CUDA building (cuda/): compiling `load_inline` candidates with one stand-in for torch's (cuda/inline.py: run on
  the GPU, check where no GPU can run them, build ahead in a prebuild), the object and extension cache
  (cuda/cache.py) and its `kernelskill cache` command (cache_cli.py); cuda/__init__.py maps the rest.
"""
