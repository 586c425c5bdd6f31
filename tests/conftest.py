"""Shared fixtures. Everything here runs on a CPU: Triton kernels go through Triton's interpreter."""

from __future__ import annotations

import os
from types import SimpleNamespace
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # any in-process Triton use in tests runs on CPU tensors
# One OpenMP thread per process, inherited by every runner, zygote and CLI the tests start (the sandbox passes OMP_*
# on). The suite runs several torch processes per core; with a thread per core each, OpenMP's spinning threads fought
# for the cores: a review of r01 took 72 s instead of 14 s on 2 busy cores, and its 30x speedup read 0.3x.
os.environ.setdefault("OMP_NUM_THREADS", "1")

DATA = Path(__file__).parent / "data"


def fast_settings(**overrides):
    """Review settings for CPU tests: full protocol (5 trials, guards on) with short timing."""
    from kernelskill.settings import ReviewSettings

    values = dict(device="cpu", warmup=1, iters=3)
    values.update(overrides)
    return ReviewSettings(**values)


def run_review(problem: str | Path, candidate: str | Path, tmp_path: Path | None = None, **overrides):
    from kernelskill.candidate import read_candidate
    from kernelskill.review.reviewer import review

    problem = DATA / problem if not Path(problem).is_absolute() else Path(problem)
    candidate = DATA / candidate if not Path(candidate).is_absolute() else Path(candidate)
    settings = fast_settings(**overrides)
    return review(problem, read_candidate(candidate, settings.backend), settings, log_dir=tmp_path)


def sandbox_without(*layers: str):
    """The sandbox with `layers` off. Where the worker keeps the harness's uid (a root harness whose Python uid 65534
    cannot read), the user layer holds only through filesystem, processes and network; turning one of those off
    turns the user layer off too, as the sandbox's own error message would ask."""
    from kernelskill.review import confine
    from kernelskill.settings import Sandbox

    off = set(layers)
    keeps_uid = confine._drop_plan({"user": True}, [])[0] is None
    if keeps_uid and off & {"filesystem", "processes", "network"}:
        off.add("user")
    return Sandbox(**{name: False for name in off})


@pytest.fixture
def review_cpu(tmp_path):
    def _run(problem, candidate, **overrides):
        return run_review(problem, candidate, tmp_path, **overrides)

    return _run


@pytest.fixture
def server():
    """A local HTTP server speaking the OpenAI chat-completions (and Anthropic messages) protocol; see
    kernelskill/llm/local_server.py."""
    from kernelskill.llm.local_server import ScriptedServer

    srv = ScriptedServer().start()
    try:
        yield srv
    finally:
        srv.stop()


# Tests that took 15 s or more on 2 busy cores (pytest --durations), marked `slow` here in one place so that
# `pytest -m "not slow"` is a fast subset: (node id prefix, a word the id must also hold or "", what makes it slow).
SLOW = (
    ("tests/review/test_verdicts.py::test_candidate_gets_expected_verdict[", "cuda", "nvcc builds (1-3 min cold)"),
    ("tests/review/test_verdicts.py::test_candidate_gets_expected_verdict[", "crash", "a worker that crashes"),
    ("tests/review/test_verdicts.py::test_candidate_gets_expected_verdict[", "hang", "a worker past its limit"),
    ("tests/review/test_prebuild.py::test_prebuild_fills_the_build_cache", "", "a CUDA build"),
    ("tests/review/test_precision.py::test_under_kernelbench_rules", "", "reviews on several input sets"),
    ("tests/review/test_precision.py::test_a_candidate_right_only_for", "", "reviews on several input sets"),
    ("tests/review/test_warm_worker.py::", "", "worker start-ups"),
    ("tests/review/test_cheats.py::test_large_speedup_is_reverified", "", "20 more verify trials"),
    ("tests/memory/test_mem_bench.py::test_a_wrong_first_choice", "", "the decision benchmark, twice"),
    ("tests/memory/test_mem_bench.py::test_cli_prints_the_accuracy", "", "the decision benchmark"),
    ("tests/memory/test_mem_cli.py::test_explain_with_the_problem", "", "the problem's floor on the meta device"),
    ("tests/memory/test_mem_method_check.py::test_cpu_smoke_run", "", "Triton and PyTorch pairs timed"),
    ("tests/bench/test_corpus.py::test_bench_over_a_corpus", "", "a bench with real reviews"),
    ("tests/review/test_prebuild.py::test_a_compile_error_is_a_verdict_without_a_review", "",
     "g++ against torch's headers (and their precompiled header, a minute, when none is built yet)"),
    ("tests/review/test_problem_probe.py::test_a_problem_whose_get_inputs_hangs", "", "a probe past its limit"),
    ("tests/test_cli_manners.py::test_the_optimize_summary_piped", "", "an optimize run end to end"),
    ("tests/review/test_sandbox.py::test_killing_the_reviewer_kills_its_worker", "", "a reviewer killed mid-review"),
)


# The precompiled <torch/extension.h> for the two flag sets the suite builds with (C++ only, and with CUDA's include
# folder for CUDA candidates) takes about a minute each. Built when a test first needs one, the other xdist worker
# compiled its own units without it meanwhile (half a minute each) or waited. In a whole run with its own build cache
# (CI: a fresh $KERNELSKILL_CACHE) they are built in the background from the start, long before the first compile
# test (the builder's lock makes a test that comes first wait for it, and a review worker compile without it).
_PCH_PROCESS = []


def _whole_run(config) -> bool:
    """The whole suite (no paths given: the configured testpaths), slow tests included, no -k."""
    return (config.args_source == pytest.Config.ArgsSource.TESTPATHS and "slow" not in (config.option.markexpr or "")
            and not config.option.keyword)


def pytest_configure(config):
    import shutil
    import subprocess
    import sys

    if (hasattr(config, "workerinput") or not os.environ.get("KERNELSKILL_CACHE") or shutil.which("nvcc") is None
            or not _whole_run(config)):
        return
    script = ("from kernelskill.review.cuda.pch import prepare_pch\n"
              "prepare_pch(with_cuda=False)\nprepare_pch(with_cuda=True)\n")
    _PCH_PROCESS.append(subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True))


def pytest_unconfigure(config):
    for proc in _PCH_PROCESS:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.nodeid.startswith(prefix) and word in item.nodeid for prefix, word, _ in SLOW):
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _slow_files_first(items)
    if os.environ.get("KERNELSKILL_ALL_CUDA_CHECKS") == "1":
        return
    skip = pytest.mark.skip(reason="extra CUDA compile check: set KERNELSKILL_ALL_CUDA_CHECKS=1 to run it")
    for item in items:
        if "all_cuda_checks" in item.keywords:
            item.add_marker(skip)


# ------------------------------------------------------------------------------------- spreading tests over workers
# With `-n 2` xdist's default ("load") hands each worker fixed runs of consecutive tests, and a worker keeps what it
# was handed: on 2 cores one worker ended its last runs (the worker-kill and store tests) half a minute after the
# other had run out of tests. Work stealing hands out two halves and lets a worker that runs dry take the second
# half of the other's queue, so the run ends when both do, give or take the last test. The files that hold slow
# tests come first and the many quick tests last, so whatever is left to share at the end is quick.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    args = config.invocation_params.args
    if config.getoption("dist") != "load" or any(str(a).startswith(("--dist", "-d")) for a in args):
        return None  # a scheduling asked for by name is used as asked
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


def _slow_files_first(items) -> None:
    """Reorder in place: the files holding a test marked `slow` first, then the rest; within each group the files,
    and the tests within a file, keep their order (module fixtures are set up once per file and worker). Every
    worker orders its collection the same way, as xdist requires."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable

# ------------------------------------------------------------------------------- Inductor's compiled kernels, shared
# A cold torch.compile on CPU spends most of its time in g++: the CPU-capability probes Inductor compiles first (the
# same five for every graph) and each kernel. Tests that need a cold Inductor cache need its FX graph and AOT
# autograd caches cold (their hits and misses are what they check), not a fresh g++ run for a kernel another test of
# this session compiled from the same source. Inductor finds a kernel's library by its source's hash, so a fresh
# cache holding the libraries already compiled still misses every graph, lowers it and writes its code again.
_GRAPH_CACHES = ("fxgraph", "aotautograd", "locks")


def _inductor_kernel_store(tmp_path_factory) -> Path:
    """One folder for the session, shared by the xdist workers (as test_cuda_build's build cache)."""
    base = tmp_path_factory.getbasetemp()
    store = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "inductor-kernels"
    store.mkdir(exist_ok=True)
    return store


def _copy_kernels(source: Path, target: Path, owner: tuple[int, int] | None = None) -> None:
    """The compiled kernels under `source` (every file outside the graph caches) into `target`, where missing;
    each file appears whole (copied aside, then renamed)."""
    import shutil

    for folder in sorted(p for p in source.iterdir() if p.is_dir() and p.name not in _GRAPH_CACHES):
        for file in sorted(p for p in folder.iterdir() if p.is_file()):
            dest = target / folder.name / file.name
            if dest.exists():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.parent / f".{file.name}.{os.getpid()}.tmp"
            try:  # Inductor replaces its files, never writes into one: a link is a copy here
                if owner is not None and owner != (os.geteuid(), os.getegid()):
                    raise OSError("another owner: copied")
                os.link(file, tmp)
            except OSError:
                shutil.copy2(file, tmp)
                if owner is not None:
                    os.chown(tmp, *owner)
                    os.chown(dest.parent, *owner)
            os.replace(tmp, dest)


@pytest.fixture
def fresh_inductor_cache(tmp_path, monkeypatch, tmp_path_factory):
    """Inductor caches of this test's own (the sandbox's caches, under a folder of this test's): their FX graph and
    AOT autograd caches are empty, so every graph is a cache miss compiled here unless the test warmed it; the
    kernels compiled by earlier tests of the session are in them (see above), and this test's are kept for later
    ones. Seeded: the shared runners' folder and the reference runner's (where a judged review's torch.compile
    baseline and the warm-ups compile); a candidate's runner's, whose folder is named by its source, through
    `seed_candidate(source)`. Harvested: every runner's."""
    from kernelskill.review import caches, confine

    root = tmp_path / "sandbox-caches"
    monkeypatch.setenv("KERNELSKILL_SANDBOX_CACHE", str(root))
    drop = confine._drop_plan({"user": True}, [])[0]
    uid, gid = (drop["uid"], drop["gid"]) if drop else (os.geteuid(), os.getegid())
    owner = (uid, gid) if os.geteuid() == 0 else None
    base = caches.sandbox_cache_root(uid)  # as caches.runner_caches names its folders
    store = _inductor_kernel_store(tmp_path_factory)

    def seed(folder: Path) -> Path:
        inductor = folder / "inductor"
        inductor.mkdir(parents=True, exist_ok=True)
        _copy_kernels(store, inductor, owner)  # runner_caches makes the folders above it the runner's
        return inductor

    seed(base)
    seed(base / "reference")
    yield SimpleNamespace(seed_candidate=lambda source: seed(base / "candidates" / caches.owner_key(source)))
    for inductor in root.glob("**/inductor"):
        _copy_kernels(inductor, store)


def process_running(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
