"""Where a candidate is evaluated, and what comes back: the one module to read for that.

The loop (runner.py) asks its task's Evaluator three things, and records every answer in the run store:

    review(problem, candidate, settings, log_dir)  -> ReviewResult   compile, verify, time (review/reviewer.py)
    prebuild(problem, candidate, settings, log_dir) -> Prebuilt|None  build CUDA sources on CPU cores first
    warm_compile(problem, settings, log_dir)        -> Warmed|None    fill Inductor's cache with torch.compile(Model)
                                                                      (asked by bench --baseline compile, not the
                                                                      loop, before anything is timed)
    profile(problem, candidate_path, kb, keep)      -> Profiled       Nsight Compute + PyTorch profiler
                                                                      (memory/collect.py), for the decision policy

Each evaluation runs in a worker process of its own (review/sandbox.py) with a device to itself, since timing needs
the GPU alone. An evaluator decides which device and makes the evaluation wait for it; the time it waited comes back
as the stage `queue` (ReviewResult.stage_seconds, Profiled.stage_seconds), which the loop stores with the rest, so a
task's seconds by stage are added up in one place (RunStore.stage_totals). The stage `gpu_wait` of a review is how long
its device sat idle while that candidate's prebuild ran: the GPU waiting on a build.

    LocalEvaluator   this machine's device, one evaluation at a time                       `kernelskill optimize`
    PooledEvaluator  this machine's GPUs, one evaluation per GPU; its worker sees that GPU  `kernelskill bench`
    RayEvaluator     one GPU (or CPU) of some node of a Ray cluster: the evaluation runs    `bench --ray ADDRESS`
                     there as it would here, its result and full log come back and land in
                     this machine's run folder (bench/cluster.py connects and checks nodes)

A review never raises for a bad candidate (that is a verdict); a KernelSkillError is the user's to fix (a malformed
problem file), and an EvaluationLost is an evaluation Ray could not finish on any attempt.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kernelskill.candidate import Candidate
from kernelskill.errors import KernelSkillError
from kernelskill.folders import write_atomically
from kernelskill.loop.devices import REVIEWS_PER_GPU, SPARES_PER_GPU, Devices
from kernelskill.loop.settings import LoopSettings
from kernelskill.memory.policy.evidence import Evidence
from kernelskill.review.results import ReviewResult
from kernelskill.settings import ReviewSettings

if TYPE_CHECKING:
    from kernelskill.memory.knowledge import KnowledgeBase
    from kernelskill.profiling.run import ProfileSettings
    from kernelskill.review.reviewer import Prebuilt, Warmed

# what runs in the worker, replaceable (tests: scripted ones); the defaults are review/reviewer.py's and
# memory/collect.py's own functions
Reviewer = Callable[..., ReviewResult]  # (problem, candidate, settings, log_dir=, env=)
Prebuilder = Callable[[Path, Candidate, ReviewSettings, Path], "Prebuilt | None"]
Profiler = Callable[[Path, Path, "KnowledgeBase", "ProfileSettings"], Evidence]

RETRIES = 3  # Ray: re-runs of an evaluation whose worker process or node died


@dataclass
class Profiled:
    """A profile's evidence, and its seconds: "profile" (the run itself) and "queue" (waiting for a device)."""

    evidence: Evidence
    stage_seconds: dict[str, float]


class Evaluator(Protocol):
    """Runs a task's evaluations somewhere. Every method may be called from several threads at once."""

    device: str  # "cuda" or "cpu": what candidates run on
    slots: int  # evaluations that can run at the same time

    def review(self, problem: Path, candidate: Candidate, settings: ReviewSettings, log_dir: Path) -> ReviewResult:
        """Compile, verify and time the candidate; its worker log lands in `log_dir`, its wait in stage `queue`."""

    def prebuild(self, problem: Path, candidate: Candidate, settings: ReviewSettings,
                 log_dir: Path) -> Prebuilt | None:
        """Build a CUDA candidate into the build cache before it waits for a device (None: nothing to build here);
        a Prebuilt that holds a result did not compile, a verdict that needs no device."""

    def warm_compile(self, problem: Path, settings: ReviewSettings, log_dir: Path) -> Warmed | None:
        """Compile torch.compile(Model) into the cache later reviews on this machine read (None: not done here).
        It uses a device without taking it: the caller makes sure nothing is being timed meanwhile."""

    def profile(self, problem: Path, candidate: Path, kb: KnowledgeBase, keep: Path) -> Profiled:
        """Profile the candidate file; its driver, logs, ncu report and CSV are kept in `keep`."""

    def cannot_profile(self) -> str | None:
        """What profile() needs that is missing here (said after "--profile on needs"), or None when it can run."""

    def device_name(self) -> str | None:
        """The device as the agents are told of it ("NVIDIA H200", "cpu (Triton interpreter)")."""

    def describe(self) -> str:
        """Where evaluations go, for the start of a run ("" for this machine)."""

    def placement(self) -> dict:
        """Where evaluations go, for the run's config in the store."""

    def close(self) -> None:
        """Let go of what the evaluator holds (a Ray connection it opened)."""


class EvaluationLost(RuntimeError):
    """An evaluation that Ray could not finish on any attempt: the task fails, the run goes on."""


def check_backend(device: str, backend: str) -> None:
    if device == "cpu" and backend == "cuda":
        raise KernelSkillError(
            "--backend cuda needs a GPU: on this machine CUDA kernels can be compile-checked but never run, so no "
            "candidate could be verified. Use --backend triton (Triton's interpreter runs kernels on the CPU) or run "
            "on a machine with an NVIDIA GPU."
        )


def wants_profiles(loop: LoopSettings, evaluator: Evaluator) -> bool:
    """Whether the loop profiles each base: --profile auto when the evaluator can, on insists, off never; without
    the long-term memory no decision reads a profile."""
    if loop.profile == "off" or not loop.long_term_memory:
        return False
    missing = evaluator.cannot_profile()
    if missing is not None and loop.profile == "on":
        raise KernelSkillError(f"--profile on needs {missing}")
    return missing is None


def ran_out_of_memory(result: ReviewResult) -> bool:
    """A failed review whose error says the device's memory ran out (torch's "CUDA out of memory", the driver's
    "out of memory"): beside other reviews on one GPU, that may be theirs as much as its own."""
    return not result.correct and "out of memory" in (result.error or "").lower()


def device_name_of(device: str) -> str | None:
    if device != "cuda":
        return "cpu (Triton interpreter)"
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def _settle(requested: str, backend: str) -> str:
    """The device this machine evaluates on; a CUDA backend starts preparing its builds in the background."""
    from kernelskill.review.reviewer import prepare_builds, resolve_device

    device = resolve_device(requested)
    if device == "cuda" and backend == "cuda":
        prepare_builds()
    return device


def local_evaluator(requested_device: str, backend: str) -> LocalEvaluator:
    return LocalEvaluator(_settle(requested_device, backend))


def pooled_evaluator(requested_device: str, backend: str, gpus: list[str] | None,
                     share: int = REVIEWS_PER_GPU) -> PooledEvaluator:
    """The given GPUs of this machine (None: every visible one), `share` reviews at a time each, or its CPU as one
    slot."""
    device = _settle(requested_device, backend)
    if device == "cuda" and gpus is None:
        import torch

        gpus = [str(i) for i in range(torch.cuda.device_count())]
    return PooledEvaluator(device, gpus if device == "cuda" else None, share)


# ---- this machine ------------------------------------------------------------------------------------------------


class _ThisMachine:
    def __init__(self, device: str, gpus: list[str] | None, *, reviewer: Reviewer | None = None,
                 prebuilder: Prebuilder | None = None, profiler: Profiler | None = None, share: int = 1) -> None:
        """A scripted `reviewer` gets no real builds ahead; a given `profiler` runs wherever it is asked to. `share`:
        reviews a GPU holds at once (devices.py; a CPU is never shared: its timing is the whole machine's)."""
        from kernelskill.review.reviewer import prebuild, review

        self.device = device
        self._devices = Devices(gpus, share if device == "cuda" else 1)
        self._building = threading.local()  # this thread's last prebuild: (log_dir, start, end)
        self.slots = max(1, len(self._devices.gpus)) * self._devices.share
        from kernelskill.review.reviewer import warm_compile

        self._review = reviewer or review
        self._gives_back = reviewer is None  # review() gives the device back before it ends
        self._prebuild = prebuilder or (prebuild if reviewer is None else None)
        self._warm = warm_compile if reviewer is None else None
        self._profiler = profiler
        if reviewer is None and device == "cuda" and len(self._devices.gpus) <= 1:
            from kernelskill.review.reviewer import warm_runner

            self._devices.warm = warm_runner  # the runners of the next reviews in line, started ahead
        if reviewer is None and device == "cuda":
            # reviews wait in line for each GPU: a review that needs a fresh worker takes a spare already started
            # beside the one in flight, instead of holding the GPU through the start-up (review/sandbox.py)
            from kernelskill.review.sandbox import POOL

            POOL.spares = SPARES_PER_GPU

    def review(self, problem: Path, candidate: Candidate, settings: ReviewSettings, log_dir: Path) -> ReviewResult:
        if self.device == "cuda":  # the speed of light's problem count, on a CPU core before the GPU is taken
            from kernelskill.review.sol import count_ahead

            count_ahead(problem)
        alone = False
        while True:
            with self._devices.take((problem, candidate, settings), alone=alone) as (env, waited, give_back, turn):
                built = getattr(self._building, "span", None)
                idle_from, taken, released = self._devices.idle_since.value, time.monotonic(), []
                release = lambda: (released.append(time.monotonic()), give_back())  # type: ignore[func-returns-value]  # noqa: E731
                result = self._review(problem, candidate, settings, log_dir=log_dir, env=env,
                                      **(({"release": release} | ({"turn": turn} if turn else {}))
                                         if self._gives_back else {}))
            if turn is None or alone or not ran_out_of_memory(result):
                break
            # out of the device's memory beside other reviews: the candidate is owed a review with the device alone
            alone = True
        if alone:
            result.flags.append("reviewed_alone: it ran out of device memory beside other reviews, and was reviewed "
                                "again with the device to itself")
        if turn is not None:
            result.stage_seconds["turn_wait"] = round(turn.waited, 3)  # its steps' waits for the device's turn
        result.stage_seconds["gpu_held"] = round((released[0] if released else time.monotonic()) - taken, 3)
        result.stage_seconds["queue"] = round(result.stage_seconds.get("queue", 0.0) + waited, 3)
        if built is not None and built[0] == log_dir:  # the device sat idle while this candidate's prebuild ran
            gpu_wait = min(built[2], taken) - max(built[1], idle_from)
            if gpu_wait > 0:
                result.stage_seconds["gpu_wait"] = round(gpu_wait, 3)
        self._building.span = None
        return result

    def prebuild(self, problem: Path, candidate: Candidate, settings: ReviewSettings,
                 log_dir: Path) -> Prebuilt | None:
        if not self._prebuild:
            return None
        started = time.monotonic()
        try:
            return self._prebuild(problem, candidate, settings, log_dir)
        finally:  # the review that follows in this thread reads it (`review`)
            self._building.span = (log_dir, started, time.monotonic())

    def warm_compile(self, problem: Path, settings: ReviewSettings, log_dir: Path) -> Warmed | None:
        if self._warm is None:
            return None
        gpus = self._devices.gpus  # Inductor's cache is the machine's: any of its GPUs fills it
        return self._warm(problem, settings, log_dir=log_dir, env={"CUDA_VISIBLE_DEVICES": gpus[0]} if gpus else None)

    def profile(self, problem: Path, candidate: Path, kb: KnowledgeBase, keep: Path) -> Profiled:
        from kernelskill.memory.policy.collect import profile_candidate
        from kernelskill.profiling.run import ProfileSettings

        run = self._profiler or profile_candidate
        with self._devices.take(alone=True) as (env, waited, _, _turn):
            started = time.monotonic()
            evidence = run(problem, candidate, kb, ProfileSettings(keep_dir=keep, env=env or None))
            seconds = time.monotonic() - started
        return Profiled(evidence, {"profile": round(seconds, 3), "queue": round(waited, 3)})

    def cannot_profile(self) -> str | None:
        if self._profiler is not None:
            return None
        from kernelskill.profiling.run import find_ncu

        if self.device != "cuda":
            return "a GPU; on the CPU the decision rests on code features alone"
        if find_ncu("ncu") is None:
            return ("Nsight Compute: put `ncu` on PATH (it ships with the CUDA toolkit), or use --profile auto to "
                    "decide on code features when it is missing")
        return None

    def device_name(self) -> str | None:
        return device_name_of(self.device)

    def describe(self) -> str:
        return ""

    def placement(self) -> dict:
        return {"gpus": self._devices.gpus or None}

    def close(self) -> None:
        from kernelskill.review.sandbox import POOL

        POOL.spares = 0
        POOL.close()


class LocalEvaluator(_ThisMachine):
    """This machine's device, one evaluation at a time; the worker sees the device as this process does."""

    def __init__(self, device: str, **replace) -> None:
        super().__init__(device, None, **replace)


class PooledEvaluator(_ThisMachine):
    """These GPUs of this machine (indices "0", "1" …; None: the CPU, one slot), `share` reviews per GPU at a time
    (their timed steps one at a time: review/turns.py); each worker sees only its GPU (CUDA_VISIBLE_DEVICES)."""

    def __init__(self, device: str, gpus: list[str] | None, share: int = 1, **replace) -> None:
        super().__init__(device, gpus, share=share, **replace)


# ---- a Ray cluster -----------------------------------------------------------------------------------------------
# Nothing travels as a path, since nodes do not share a disk: problem and candidate go as source text, settings as
# JSON, and the remote side rebuilds them. Ray re-runs an evaluation whose worker process or node died
# (`max_retries`); an exception raised by the evaluation itself is a real error and is not retried.


@dataclass(frozen=True)
class Node:
    node_id: str
    address: str
    hostname: str
    cpus: int
    gpus: int
    kernelskill: str | None = None
    torch: str | None = None
    ncu: bool = False

    def line(self) -> str:
        return (f"node {self.address} ({self.hostname}): {self.gpus} GPU(s), {self.cpus} CPU(s), kernelskill "
                f"{self.kernelskill}, torch {self.torch}, ncu {'found' if self.ncu else 'missing'}")


class RayEvaluator:
    """Places evaluations on the cluster, one GPU (or CPU) each, and brings their results and logs back. Made by
    bench/cluster.py connect()."""

    def __init__(self, ray, address: str, nodes: list[Node], device: str, owned: bool) -> None:
        self.ray, self.address, self.nodes, self.device, self._owned = ray, address, nodes, device, owned
        # one GPU per evaluation, as locally: timing needs the GPU to itself
        resources = {"num_gpus": 1} if device == "cuda" else {"num_cpus": 1}
        options = dict(max_retries=RETRIES, retry_exceptions=False, **resources)
        self._review = ray.remote(**options)(_remote_review)
        self._profile = ray.remote(**options)(_remote_profile)

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def slots(self) -> int:
        return max(1, self.gpus if self.device == "cuda" else sum(n.cpus for n in self.nodes))

    def review(self, problem: Path, candidate: Candidate, settings: ReviewSettings, log_dir: Path) -> ReviewResult:
        problem = Path(problem)
        sent = {"source": candidate.source, "path": str(candidate.path) if candidate.path else None,
                "backend": candidate.backend, "kernel_names": list(candidate.kernel_names),
                "syntax_error": candidate.syntax_error}
        label = f"review {problem.stem}" + (f" {candidate.path.name}" if candidate.path else "")  # its title
        out = self._run(self._review.options(name=label), str(problem), problem.read_text(), sent,
                        settings.model_dump_json())
        log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kernelskill-review-"))
        log_path = write_atomically(log_dir / "worker.log", f"[kernelskill] {_placed(out)}\n{out['log']}")
        write_atomically(log_dir / "placement.json", json.dumps(_placement(out), indent=2) + "\n")
        result = ReviewResult.model_validate(out["result"])
        result.stage_seconds["queue"] = round(result.stage_seconds.get("queue", 0.0) + out["queue_s"], 3)
        return result.model_copy(update={"log_path": str(log_path)})

    def prebuild(self, problem: Path, candidate: Candidate, settings: ReviewSettings, log_dir: Path) -> None:
        return None  # the build cache is per machine: a node builds for itself

    def warm_compile(self, problem: Path, settings: ReviewSettings, log_dir: Path) -> None:
        return None  # Inductor's cache is per machine too: a node compiles in its own reviews

    def profile(self, problem: Path, candidate: Path, kb: KnowledgeBase, keep: Path) -> Profiled:
        problem, candidate = Path(problem), Path(candidate)
        out = self._run(self._profile.options(name=f"profile {problem.stem} {candidate.name}"),
                        problem.name, problem.read_text(), candidate.name, candidate.read_text(), kb)
        for name, data in out["files"].items():
            write_atomically(keep / name, data)
        write_atomically(keep / "placement.json", json.dumps(_placement(out), indent=2) + "\n")
        text = out["evidence"]  # name this machine's copies, not the node's scratch files
        for remote, local in ((out["paths"]["keep"], keep), (out["paths"]["candidate"], candidate),
                              (out["paths"]["problem"], problem)):
            text = text.replace(json.dumps(remote)[1:-1], json.dumps(str(local))[1:-1])
        return Profiled(Evidence.model_validate_json(text), {"profile": out["seconds"], "queue": out["queue_s"]})

    def cannot_profile(self) -> str | None:
        if self.device != "cuda":
            return "a GPU; on the CPU the decision rests on code features alone"
        gpu_nodes = [n for n in self.nodes if n.gpus]
        if not (gpu_nodes and all(n.ncu for n in gpu_nodes)):
            return "Nsight Compute (`ncu` on PATH) on every GPU node of the Ray cluster"
        return None

    def device_name(self) -> str | None:
        return device_name_of(self.device)

    def describe(self) -> str:
        each = "one GPU" if self.device == "cuda" else "one CPU"
        head = (f"Ray cluster at {self.address}: {len(self.nodes)} node(s), {self.gpus} GPU(s), "
                f"{sum(n.cpus for n in self.nodes)} CPU(s); each evaluation takes {each} (device {self.device})")
        return "\n".join([head] + [f"  {n.line()}" for n in self.nodes])

    def placement(self) -> dict:
        return {"gpus": None, "placement": "ray",
                "ray": {"address": self.address, "retries": RETRIES, "nodes": [asdict(n) for n in self.nodes]}}

    def _run(self, fn, *args) -> dict:
        """Submit, wait, and count as queue time whatever was not the evaluation itself (waiting for a free GPU,
        placement, transfers, and any attempt lost to a dead worker). Measured as the driver's wall time less the
        remote run's own, so the clocks of different machines are never compared."""
        ray = self.ray
        submitted = time.monotonic()
        try:
            out = ray.get(fn.remote(*args))
        except ray.exceptions.RayTaskError as exc:  # raised by the evaluation itself, with the remote traceback
            if isinstance(exc.cause, KernelSkillError):  # e.g. a malformed problem file: the user's to fix
                raise exc.cause from None
            raise
        except ray.exceptions.RayError as exc:  # its worker or node died on every attempt
            first = (str(exc).strip().splitlines() or [""])[0]
            raise EvaluationLost(f"the evaluation's Ray worker or node died {RETRIES + 1} times; the last time: "
                                 f"{type(exc).__name__}: {first}") from exc
        out["queue_s"] = round(max(0.0, time.monotonic() - submitted - out["seconds"]), 3)
        return out

    def close(self) -> None:
        if self._owned and self.ray.is_initialized():
            self.ray.shutdown()


def _placement(out: dict) -> dict:
    return {**out["where"], "queue_s": out["queue_s"], "evaluation_s": round(out["seconds"], 3)}


def _placed(out: dict) -> str:
    w = out["where"]
    gpus = f"GPU {','.join(w['gpu_ids'])}" if w["gpu_ids"] else "no GPU"
    return (f"evaluated on Ray node {w['node_address']} ({w['hostname']}, node {w['node_id'][:12]}), worker pid "
            f"{w['worker_pid']}, {gpus}; queued {out['queue_s']:.2f} s")


# What runs on a Ray worker: plain module-level functions, which Ray ships by reference (module and name), so each
# worker imports this module.


def where_am_i() -> dict:
    """Where this evaluation runs: the node, the worker process and the GPUs Ray gave it."""
    import ray

    ctx = ray.get_runtime_context()
    return {"node_id": ctx.get_node_id(), "node_address": ray.util.get_node_ip_address(),
            "hostname": socket.gethostname(), "worker_id": ctx.get_worker_id(), "worker_pid": os.getpid(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}


def _gpu_env() -> dict[str, str]:
    # Ray sets CUDA_VISIBLE_DEVICES to the GPU it assigned; naming it explicitly keeps a warm review worker that
    # sees another GPU (an earlier task's) from serving this one
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}


def _remote_review(problem_path: str, problem_source: str, candidate: dict, settings_json: str) -> dict:
    start = time.monotonic()
    from kernelskill.problem import Problem
    from kernelskill.review.reviewer import review

    path = Path(problem_path)  # the driver's path: only a name in messages here
    problem = Problem(path=path, source=problem_source, name=path.stem)
    cand = Candidate(source=candidate["source"], path=Path(candidate["path"]) if candidate["path"] else None,
                     backend=candidate["backend"], kernel_names=tuple(candidate["kernel_names"]),
                     syntax_error=candidate["syntax_error"])
    settings = ReviewSettings.model_validate_json(settings_json)
    with tempfile.TemporaryDirectory(prefix="kernelskill-ray-") as tmp:
        result = review(problem, cand, settings, log_dir=Path(tmp), env=_gpu_env())
        log = Path(tmp) / "worker.log"
        text = log.read_text(errors="replace") if log.exists() else ""
    return {"result": result.model_dump(mode="json"), "log": text, "where": where_am_i(),
            "seconds": time.monotonic() - start}


def _remote_profile(problem_name: str, problem_source: str, candidate_name: str, candidate_source: str, kb) -> dict:
    start = time.monotonic()
    from kernelskill.memory.policy.collect import profile_candidate
    from kernelskill.profiling.run import ProfileSettings

    with tempfile.TemporaryDirectory(prefix="kernelskill-ray-") as tmp:
        problem, candidate, keep = Path(tmp) / problem_name, Path(tmp) / candidate_name, Path(tmp) / "profile"
        problem.write_text(problem_source)
        candidate.write_text(candidate_source)
        evidence = profile_candidate(problem, candidate, kb, ProfileSettings(keep_dir=keep, env=_gpu_env()))
        files = {p.name: p.read_bytes() for p in keep.iterdir() if p.is_file()}
    return {"evidence": evidence.model_dump_json(), "files": files, "where": where_am_i(),
            "paths": {"keep": str(keep), "candidate": str(candidate), "problem": str(problem)},
            "seconds": time.monotonic() - start}
