"""`kernelskill bench --ray` end to end on a real local Ray instance with CPU workers (Triton interpreter): every
review runs on a Ray worker and its result and log land in the driver's run store; a Ray worker killed in the middle
of an evaluation has that evaluation re-run on another worker, and the task still ends correct.

The cluster is started by this test process (`ray.init`, every port picked free, a temp dir of its own), so two
xdist workers never share one; the bench itself runs as the real CLI in a subprocess that connects to it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernelskill.store import RunStore

from kernelskill.bench.scripted_team import ScriptedTeam, TaskScript, read
from .test_bench import DATA, bench

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kernelskill[ray]'); CI installs it")

pytestmark = pytest.mark.slow
CAND = DATA / "candidates"


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node Ray cluster with 2 CPUs; yields its address. Torn down even when a test fails."""
    # short and private: Ray's socket paths must fit in 107 bytes, and the folder goes with the cluster
    temp_dir = tempfile.mkdtemp(prefix="ks-ray-", dir="/tmp")
    try:
        context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                           object_store_memory=100 * 2**20, _temp_dir=temp_dir)
        yield context.address_info["gcs_address"]
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


def reviews(out: Path) -> dict[str, list[dict]]:
    """Every review in the run store, by task name."""
    found: dict[str, list[dict]] = {}
    with RunStore.open(out) as store:
        run = store.latest_run()
        for task in store.tasks(run.id):
            for cand in store.candidates(task.id):
                row = store.review_of(cand.id)
                if row is not None:
                    found.setdefault(task.name, []).append(row.result)
    return found


def placement(review: dict) -> dict:
    return json.loads((Path(review["log_path"]).parent / "placement.json").read_text())


def test_bench_places_every_evaluation_on_ray_workers(server, tmp_path, ray_cluster):
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(DATA / "problems" / "p01_pointwise_gelu_chain.py", folder / "1_gelu_chain.py")
    shutil.copy(DATA / "problems" / "p13_scaled_leaky_relu.py", folder / "3_scaled_leaky_relu.py")
    team = ScriptedTeam({
        "1_gelu_chain": TaskScript(seed=read(CAND / "p01_pointwise_gelu_chain" / "triton_ok.py")),
        "3_scaled_leaky_relu": TaskScript(seed=read(CAND / "p13_scaled_leaky_relu" / "triton_ok.py")),
    })
    server.responder = team
    out = tmp_path / "run"
    r = bench(folder, out, server, "--ray", ray_cluster)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"Ray cluster at {ray_cluster}: 1 node(s), 0 GPU(s), 2 CPU(s)" in r.stdout  # the cluster is shown

    results = json.loads((out / "results.json").read_text())
    assert results["run"]["placement"] == "ray" and results["run"]["device"] == "cpu"  # no GPU: auto → cpu
    cluster_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert {n["node_id"] for n in results["run"]["ray"]["nodes"]} == cluster_nodes
    for task in results["tasks"]:
        assert task["success"] and task["status"] == "finished", task
        assert task["stage_seconds"]["queue"] >= 0 and task["stage_seconds"]["verify"] > 0

    found = reviews(out)
    assert set(found) == {"1_gelu_chain", "3_scaled_leaky_relu"}
    for review in (r for rs in found.values() for r in rs):
        assert review["correct"] and review["device_name"] == "cpu (Triton interpreter)"
        log = Path(review["log_path"])
        assert log.is_relative_to(out) and log.read_text().startswith("[kernelskill] evaluated on Ray node")
        where = placement(review)  # recorded by the remote function from its Ray runtime context
        assert where["node_id"] in cluster_nodes and where["worker_id"] and where["gpu_ids"] == []
        assert where["worker_pid"] != os.getpid() and where["evaluation_s"] > 0


SLOW = '''
import os as _os
import time as _time

_first_get_init_inputs = get_init_inputs


def get_init_inputs():
    # the first evaluation's first attempt announces itself, then stalls (bench's own check of the problem, before
    # any evaluation, draws on PyTorch's meta device: that one is not an evaluation)
    import torch as _torch

    if _torch.empty(0).device.type != "meta" and not _os.path.exists({marker!r}):
        with open({marker!r}, "w") as f:
            f.write(str(_os.getpid()))
        _time.sleep(90)
    return _first_get_init_inputs()
'''


def ray_worker_of(pid: int) -> tuple[int, str]:
    """The Ray worker process above `pid` (the review worker), found by its title (`ray::<task name>`)."""
    while pid > 1:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        if cmdline.startswith("ray::"):
            return pid, cmdline
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])  # the parent's pid
    raise AssertionError("no Ray worker above the review worker")


def test_a_worker_killed_mid_evaluation_is_retried_elsewhere(server, tmp_path, ray_cluster):
    folder = tmp_path / "mine"
    folder.mkdir()
    marker = tmp_path / "evaluating.pid"
    source = (DATA / "problems" / "p01_pointwise_gelu_chain.py").read_text()
    (folder / "5_slow_gelu.py").write_text(source + SLOW.format(marker=str(marker)))
    server.responder = ScriptedTeam({
        "5_slow_gelu": TaskScript(seed=read(CAND / "p01_pointwise_gelu_chain" / "triton_ok.py")),
    })
    out = tmp_path / "run"
    # the marker is this test's instrument, written by the problem's code inside the review worker, whose
    # sandbox (rightly) lets it write only its scratch folder and see only its own pids: the filesystem and
    # processes layers are off for this test (and the user layer where it leans on them)
    from tests.conftest import sandbox_without

    keep = sandbox_without("filesystem", "processes")
    proc = bench(folder, out, server, "--ray", ray_cluster, wait=False,
                 env_extra={"KERNELSKILL_SANDBOX": ",".join(k for k, on in keep.model_dump().items() if on)})
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), proc.communicate()[1][-3000:] if proc.poll() is not None else "no evaluation began"
        killed, title = ray_worker_of(int(marker.read_text()))
        assert "5_slow_gelu" in title  # the Ray task evaluating this problem, by the name the evaluator gave it
        os.kill(killed, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]

    task = json.loads((out / "results.json").read_text())["tasks"][0]
    assert task["success"] and task["status"] == "finished", task
    assert [h["verdict"] for h in task["history"]] == ["correct", "correct"]  # the seed, then round 1
    seed = reviews(out)["5_slow_gelu"][0]
    assert seed["correct"]
    where = placement(seed)
    assert where["worker_pid"] != killed  # the retry ran in another worker process
    # the lost attempt is counted as time not spent evaluating (queue), not hidden
    assert where["queue_s"] > 0.5 and task["stage_seconds"]["queue"] >= where["queue_s"]


def test_connect_says_what_to_fix(ray_cluster, monkeypatch):
    from kernelskill.bench.cluster import connect
    from kernelskill.errors import KernelSkillError

    # the cluster (this process is connected to it) has CPUs only
    with pytest.raises(KernelSkillError, match="has no GPU .*--device cpu"):
        connect(ray_cluster, "cuda")
    assert connect(ray_cluster, "auto").device == "cpu"
    assert ray.is_initialized()  # a connection the caller made is left alone

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    start = time.monotonic()
    with pytest.raises(KernelSkillError, match="cannot reach a Ray cluster at 127.0.0.1:1"):
        connect("127.0.0.1:1", "auto")  # nothing listens there: Ray itself would wait for minutes
    assert time.monotonic() - start < 10
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(KernelSkillError, match=r"pip install 'kernelskill\[ray\]'"):
        connect("auto", "auto")


def test_a_profile_runs_on_the_cluster_and_is_kept_here(ray_cluster, tmp_path):
    """The profile plumbing on CPU workers: no GPU and no ncu there, so the evidence says so, but the remote run,
    the files kept and the paths named are the same as on a GPU node."""
    from kernelskill.bench.cluster import connect
    from kernelskill.memory import load_knowledge
    from kernelskill.profiling.run import DRIVER_NAME

    problem = DATA / "problems" / "p01_pointwise_gelu_chain.py"
    candidate = tmp_path / "kernels" / "seed-1.py"
    candidate.parent.mkdir()
    candidate.write_text(read(CAND / "p01_pointwise_gelu_chain" / "triton_ok.py"))
    keep = tmp_path / "profiles" / "seed-1"
    profiled = connect(ray_cluster, "cpu").profile(problem, candidate, load_knowledge(), keep)
    evidence, stages = profiled.evidence, profiled.stage_seconds
    assert evidence.ncu_status == "missing" and "no CUDA device" in evidence.profiler_note
    assert evidence.code_path == str(candidate) and evidence.code_features  # features read from the source
    assert any(str(keep) in line for line in evidence.collection)  # this machine's copy, not the node's scratch
    assert "kernelskill-ray-" not in evidence.model_dump_json()
    assert (keep / DRIVER_NAME).is_file() and placement({"log_path": str(keep / "x")})["evaluation_s"] > 0
    assert stages["profile"] > 0 and stages["queue"] >= 0
