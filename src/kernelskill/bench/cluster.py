"""Evaluations on a Ray cluster (`kernelskill bench --ray ADDRESS`): the loop and its LLM calls stay on this machine
(the driver); every review and every profile is one Ray task that takes one GPU (or, with --device cpu, one CPU) of
some node, runs there exactly as it would run locally, and sends back its result and its full worker log. The
driver writes the log into the run folder, so the run store holds everything a local run holds.

    evaluator = connect("auto", "auto")      # the cluster `ray start --head` started on this machine
    result = evaluator.review(problem_path, candidate, settings, log_dir, stages)

Nothing travels as a path, since nodes do not share a disk: problem and candidate go as source text, settings as
JSON, and the remote side rebuilds them. Ray re-runs an evaluation whose worker process or node died (a system
failure, `max_retries`); an exception raised by the evaluation itself is a real error and is not retried.

What the cluster needs: every node has the same kernelskill, torch and triton installed as the driver (and the same
Ray version), since the remote functions live in this module and import the reviewer; GPU nodes need the CUDA build
of torch (and `ncu` on PATH for profiles). No `runtime_env` is sent: a package that must be installed per node is
cheaper and more predictable than shipping the environment with every job. Run `bench` on a node of the cluster
(typically the head), or connect from elsewhere with a `ray://HEAD:10001` address (Ray Client, which needs
`pip install 'ray[client]'`). A cluster with token authentication also needs its token on the driver (Ray reads
RAY_AUTH_TOKEN or ~/.ray/auth_token).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelskill import __version__
from kernelskill.candidate import Candidate
from kernelskill.errors import KernelSkillError

RETRIES = 3  # re-runs of an evaluation whose worker process or node died
PROBE_TIMEOUT_S = 180.0  # each node answers which kernelskill, torch and ncu it has (a cold torch import included)
INSTALL = "install it with pip install 'kernelskill[ray]'"
EVERY_NODE = "every node needs the same kernelskill, torch and triton as this machine"


class EvaluationLost(RuntimeError):
    """An evaluation that Ray could not finish on any attempt: the task fails, the run goes on."""


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


# ---- what runs on a Ray worker -----------------------------------------------------------------------------------
# Plain module-level functions: Ray ships them by reference (module and name), so each worker imports this module.


def _where() -> dict:
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
    from kernelskill.settings import ReviewSettings

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
    return {"result": result.model_dump(mode="json"), "log": text, "where": _where(),
            "seconds": time.monotonic() - start}


def _remote_profile(problem_name: str, problem_source: str, candidate_name: str, candidate_source: str, kb) -> dict:
    start = time.monotonic()
    from kernelskill.memory.collect import profile_candidate
    from kernelskill.memory.profiling import ProfileSettings

    with tempfile.TemporaryDirectory(prefix="kernelskill-ray-") as tmp:
        problem, candidate, keep = Path(tmp) / problem_name, Path(tmp) / candidate_name, Path(tmp) / "profile"
        problem.write_text(problem_source)
        candidate.write_text(candidate_source)
        evidence = profile_candidate(problem, candidate, kb, ProfileSettings(keep_dir=keep, env=_gpu_env()))
        files = {p.name: p.read_bytes() for p in keep.iterdir() if p.is_file()}
    return {"evidence": evidence.model_dump_json(), "files": files, "where": _where(),
            "paths": {"keep": str(keep), "candidate": str(candidate), "problem": str(problem)},
            "seconds": time.monotonic() - start}


def _probe() -> dict:
    import kernelskill
    from kernelskill.memory.profiling import find_ncu

    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {**_where(), "kernelskill": kernelskill.__version__, "torch": torch_version,
            "ncu": find_ncu("ncu") is not None}


# ---- the driver's side -------------------------------------------------------------------------------------------


class RayEvaluator:
    """Places evaluations on the cluster, one GPU (or CPU) each, and brings their results and logs back."""

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
        """Evaluations that can run at once."""
        return max(1, self.gpus if self.device == "cuda" else sum(n.cpus for n in self.nodes))

    @property
    def has_ncu(self) -> bool:
        """Every GPU node can profile with Nsight Compute."""
        gpu_nodes = [n for n in self.nodes if n.gpus]
        return bool(gpu_nodes) and all(n.ncu for n in gpu_nodes)

    def describe(self) -> str:
        each = "one GPU" if self.device == "cuda" else "one CPU"
        head = (f"Ray cluster at {self.address}: {len(self.nodes)} node(s), {self.gpus} GPU(s), "
                f"{sum(n.cpus for n in self.nodes)} CPU(s); each evaluation takes {each} (device {self.device})")
        return "\n".join([head] + [f"  {n.line()}" for n in self.nodes])

    def summary(self) -> dict:
        """For the run config: where evaluations were placed."""
        return {"address": self.address, "retries": RETRIES, "nodes": [asdict(n) for n in self.nodes]}

    def review(self, problem: Path, candidate: Candidate, settings, log_dir: Path | None,
               stages: dict[str, float] | None = None):
        """One review on the cluster; the same ReviewResult a local review gives, its log in `log_dir`."""
        from kernelskill.review.results import ReviewResult

        problem = Path(problem)
        sent = {"source": candidate.source, "path": str(candidate.path) if candidate.path else None,
                "backend": candidate.backend, "kernel_names": list(candidate.kernel_names),
                "syntax_error": candidate.syntax_error}
        label = f"review {problem.stem}" + (f" {candidate.path.name}" if candidate.path else "")  # its title
        out = self._run(self._review.options(name=label), stages, str(problem), problem.read_text(), sent,
                        settings.model_dump_json())
        log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kernelskill-review-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / "worker.log"
        log_path.write_text(f"[kernelskill] {_placed(out)}\n{out['log']}")
        (log_dir / "placement.json").write_text(json.dumps(_placement(out), indent=2) + "\n")
        result = ReviewResult.model_validate(out["result"])
        return result.model_copy(update={"log_path": str(log_path)})

    def profile(self, problem: Path, candidate: Path, kb, keep: Path, stages: dict[str, float]):
        """One profile on the cluster; its driver, logs, ncu report and CSV are kept in `keep`, as locally."""
        from kernelskill.memory.evidence import Evidence

        problem, candidate = Path(problem), Path(candidate)
        out = self._run(self._profile.options(name=f"profile {problem.stem} {candidate.name}"), stages,
                        problem.name, problem.read_text(), candidate.name, candidate.read_text(), kb)
        stages["profile"] = stages.get("profile", 0.0) + out["seconds"]
        keep.mkdir(parents=True, exist_ok=True)
        for name, data in out["files"].items():
            (keep / name).write_bytes(data)
        (keep / "placement.json").write_text(json.dumps(_placement(out), indent=2) + "\n")
        text = out["evidence"]  # name this machine's copies, not the node's scratch files
        for remote, local in ((out["paths"]["keep"], keep), (out["paths"]["candidate"], candidate),
                              (out["paths"]["problem"], problem)):
            text = text.replace(json.dumps(remote)[1:-1], json.dumps(str(local))[1:-1])
        return Evidence.model_validate_json(text)

    def _run(self, fn, stages: dict[str, float] | None, *args) -> dict:
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
        queued = max(0.0, time.monotonic() - submitted - out["seconds"])
        out["queue_s"] = round(queued, 3)
        if stages is not None:
            stages["queue"] = stages.get("queue", 0.0) + queued
        return out

    def close(self) -> None:
        if self._owned and self.ray.is_initialized():
            self.ray.shutdown()

    def __enter__(self) -> RayEvaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _placement(out: dict) -> dict:
    return {**out["where"], "queue_s": out["queue_s"], "evaluation_s": round(out["seconds"], 3)}


def _placed(out: dict) -> str:
    w = out["where"]
    gpus = f"GPU {','.join(w['gpu_ids'])}" if w["gpu_ids"] else "no GPU"
    return (f"evaluated on Ray node {w['node_address']} ({w['hostname']}, node {w['node_id'][:12]}), worker pid "
            f"{w['worker_pid']}, {gpus}; queued {out['queue_s']:.2f} s")


def connect(address: str, device: str) -> RayEvaluator:
    """Connect to the cluster at `address` ("auto", "host:port" or "ray://host:port"), learn its nodes, and settle
    the device: "auto" means cuda when the cluster has GPUs, whether or not this machine has one."""
    try:
        import ray
    except ImportError:
        raise KernelSkillError(f"--ray needs Ray, which is not installed here; {INSTALL} ({EVERY_NODE}, "
                               "and Ray itself)") from None
    owned = not ray.is_initialized()  # a caller that connected already (a test, a notebook) keeps its connection
    if owned:
        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the user's to fix: say how
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
            client = (" A ray:// address uses Ray Client: pip install 'ray[client]'." if address.startswith("ray://")
                      else "")
            raise KernelSkillError(
                f"cannot connect to the Ray cluster at {address!r}: {first}.{client} Start one with `ray start "
                "--head` on this machine and pass --ray auto, or pass the address `ray start --head` printed "
                "(HEAD_IP:6379) from a node of the cluster, or ray://HEAD_IP:10001 from elsewhere"
            ) from None
    try:
        nodes = _nodes(ray)
        device = _resolve(device, nodes, address)
        return RayEvaluator(ray, address, nodes, device, owned)
    except BaseException:
        if owned:
            ray.shutdown()
        raise


def _check_reachable(address: str) -> None:
    """Ray waits minutes on an address where nothing listens; fail fast and say so instead."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise KernelSkillError(f"--ray {address!r}: give auto, HOST:PORT (e.g. 10.0.0.5:6379) or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise KernelSkillError(
            f"cannot reach a Ray cluster at {address}: {exc}. Is `ray start --head` running there? Its address is "
            "the one it printed (port 6379 by default)"
        ) from None


def _nodes(ray) -> list[Node]:
    """The alive nodes, each asked (by a small task pinned to it) what it has installed: a node that cannot
    import kernelskill fails here, with its name, rather than in the middle of the run."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = [n for n in ray.nodes() if n.get("Alive")]
    probe = ray.remote(_probe)
    refs = [probe.options(num_cpus=0, max_retries=1, name="kernelskill probe",
                          scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
            for n in alive]
    nodes = []
    for info, ref in zip(alive, refs):
        where = f"{info.get('NodeManagerAddress')} ({info.get('NodeManagerHostname')})"
        try:
            found = ray.get(ref, timeout=PROBE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise KernelSkillError(f"Ray node {where} did not answer within {PROBE_TIMEOUT_S:.0f} s") from None
        except Exception as exc:  # noqa: BLE001 - most often kernelskill or torch missing on that node
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            raise KernelSkillError(f"Ray node {where} cannot run kernelskill ({last}); {EVERY_NODE}") from None
        if found["torch"] is None or found["kernelskill"] != __version__:
            has = f"kernelskill {found['kernelskill']}, torch {found['torch'] or 'missing'}"
            raise KernelSkillError(f"Ray node {where} has {has}, this machine kernelskill {__version__}; "
                                   f"{EVERY_NODE}")
        resources = info.get("Resources") or {}
        nodes.append(Node(node_id=info["NodeID"], address=info.get("NodeManagerAddress", "?"),
                          hostname=info.get("NodeManagerHostname", "?"), cpus=int(resources.get("CPU", 0)),
                          gpus=int(resources.get("GPU", 0)), kernelskill=found["kernelskill"], torch=found["torch"],
                          ncu=found["ncu"]))
    if not nodes:
        raise KernelSkillError("the Ray cluster has no alive node")
    return nodes


def _resolve(requested: str, nodes: list[Node], address: str) -> str:
    gpus = sum(n.gpus for n in nodes)
    if requested == "auto":
        return "cuda" if gpus else "cpu"
    if requested == "cuda" and not gpus:
        raise KernelSkillError(
            f"--device cuda was asked for, but the Ray cluster at {address} has no GPU (its nodes: "
            f"{'; '.join(n.line() for n in nodes)}). Add GPU nodes (`ray start` finds a node's GPUs, or pass "
            "--num-gpus), or use --device cpu"
        )
    return requested
