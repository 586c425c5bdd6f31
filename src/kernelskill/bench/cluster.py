"""Joining a Ray cluster for `kernelskill bench --ray ADDRESS`: connect, learn its nodes, settle the device.

The loop and its LLM calls stay on this machine (the driver); every review and every profile is one Ray task that
takes one GPU (or, with --device cpu, one CPU) of some node, runs there exactly as it would run locally, and sends
back its result and its full worker log, which the driver writes into the run folder. What goes where, and how,
is loop/evaluator.py's RayEvaluator; this module makes one.

    evaluator = connect("auto", "auto")      # the cluster `ray start --head` started on this machine
    result = evaluator.review(problem_path, candidate, settings, log_dir)

What the cluster needs: every node has the same kernelskill, torch and triton installed as the driver (and the same
Ray version), since the remote functions live in kernelskill.loop.evaluator and import the reviewer; GPU nodes need
the CUDA build of torch (and `ncu` on PATH for profiles). No `runtime_env` is sent: a package that must be installed
per node is cheaper and more predictable than shipping the environment with every job. Run `bench` on a node of the
cluster (typically the head), or connect from elsewhere with a `ray://HEAD:10001` address (Ray Client, which needs
`pip install 'ray[client]'`). A cluster with token authentication also needs its token on the driver (Ray reads
RAY_AUTH_TOKEN or ~/.ray/auth_token).
"""

from __future__ import annotations

import logging
import socket

from kernelskill import __version__
from kernelskill.errors import KernelSkillError
from kernelskill.loop.evaluator import Node, RayEvaluator, where_am_i

PROBE_TIMEOUT_S = 180.0  # each node answers which kernelskill, torch and ncu it has (a cold torch import included)
INSTALL = "install it with pip install 'kernelskill[ray]'"
EVERY_NODE = "every node needs the same kernelskill, torch and triton as this machine"


def _probe() -> dict:
    import kernelskill
    from kernelskill.profiling.run import find_ncu

    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {**where_am_i(), "kernelskill": kernelskill.__version__, "torch": torch_version,
            "ncu": find_ncu("ncu") is not None}


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
