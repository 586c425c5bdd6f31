"""The sandbox (review/confine.py) against a probe candidate that tries every escape, reviewed the normal way on CPU.

Each guard is shown twice: with its layer on the escape is stopped, with only that layer off the same escape goes
through (so the test can fail). The probe's static-check finding (http.client) is turned off: the layers under test
are the ones at run time.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelskill.review import confine, confine_os
from kernelskill.review.processes import named
from kernelskill.settings import Sandbox
from tests.conftest import DATA, process_running

pytestmark = pytest.mark.slow
PROBE = "candidates/special/sandbox_probe.py"
PROBLEM = "problems/p01_pointwise_gelu_chain.py"
SRC = str(Path(confine.__file__).resolve().parents[2])


def _landlock() -> int:
    try:
        return confine_os.landlock_abi()
    except confine_os.Unavailable:
        return 0


needs_landlock = pytest.mark.skipif(_landlock() < 1, reason="no Landlock on this kernel")


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the stdlib's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1]
    srv.shutdown()


@pytest.fixture
def targets(tmp_path, server, monkeypatch):
    secret = tmp_path / "planted" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("the planted secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:pw@h/db")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://user:hunter2@llm.example/v1")
    monkeypatch.setenv("COMPANY_DB", "internal-only")
    return {"PROBE_SECRET_FILE": str(secret), "PROBE_OUTSIDE_FILE": str(tmp_path / "outside" / "written.txt"),
            "PROBE_HOME": str(Path.home()), "PROBE_PORT": str(server)}


def probe(tmp_path: Path, targets: dict, sandbox: Sandbox | None = None, **overrides):
    """Review the probe; returns (what each escape got, the result)."""
    from kernelskill.candidate import read_candidate
    from kernelskill.review.reviewer import review
    from tests.conftest import fast_settings

    (tmp_path / "outside").mkdir(parents=True, exist_ok=True)
    settings = fast_settings(timing=False, rules="kernelbench", sandbox=sandbox or Sandbox(),
                             guards={"static_checks": False}, **overrides)
    result = review(DATA / PROBLEM, read_candidate(DATA / PROBE), settings, log_dir=tmp_path / "logs", env=targets)
    assert result.correct, result.error
    line = next(ln for ln in Path(result.log_path).read_text().splitlines() if ln.startswith("sandbox-probe: "))
    return json.loads(line.removeprefix("sandbox-probe: ")), result


def without(*layers: str) -> Sandbox:
    from tests.conftest import sandbox_without

    return sandbox_without(*layers)


# Where the worker drops root (a Python uid 65534 can read: the H200, a system Python), files of the harness's stay
# closed to it whatever the other layers say: a test that shows one layer is what stops an escape turns that off too.
ONE_LAYER = ("user",)


# ------------------------------------------------------------------------------------------------ the probe, all on
@needs_landlock
def test_every_escape_of_the_probe_is_stopped(tmp_path, targets):
    got, result = probe(tmp_path, targets)
    for escape in ("read_secret", "write_outside", "list_home", "connect", "environment", "harness_environ"):
        assert not got[escape]["ok"], (escape, got[escape])
    assert not Path(targets["PROBE_OUTSIDE_FILE"]).exists()
    assert {name: layer.state for name, layer in result.sandbox.items()} == {
        "network": "active", "filesystem": "active", "environment": "active", "user": "active", "processes": "active"}
    assert result.sandbox["user"].mechanism
    log = Path(result.log_path).read_text()
    assert "[kernelskill] sandbox: network: active" in log and "pw@" not in log and "hunter2" not in log


# ------------------------------------------------------------------------------------- each layer off, the escape works
@needs_landlock
def test_with_the_filesystem_layer_off_the_probe_reads_writes_and_lists(tmp_path, targets):
    got, result = probe(tmp_path, targets, without("filesystem", *ONE_LAYER))
    assert got["read_secret"] == {"ok": True, "got": "the planted secret"}
    assert got["write_outside"]["ok"] and Path(targets["PROBE_OUTSIDE_FILE"]).read_text() == "written by the candidate"
    assert got["list_home"]["ok"]
    assert not got["connect"]["ok"] and not got["environment"]["ok"]  # the other layers still hold
    assert result.sandbox["filesystem"].state == "off"


@pytest.mark.parametrize("mechanism", ["netns", "seccomp", "landlock"])
def test_the_network_is_closed_by_each_mechanism(tmp_path, targets, monkeypatch, mechanism):
    if mechanism == "landlock" and _landlock() < 4:
        pytest.skip("Landlock without TCP rules (ABI < 4)")
    monkeypatch.setenv("KERNELSKILL_SANDBOX_NETWORK", mechanism)
    got, result = probe(tmp_path, targets, without("filesystem"))
    assert not got["connect"]["ok"], got["connect"]
    if result.sandbox["network"].state == "unavailable":
        pytest.skip(f"{mechanism} not permitted here: {result.sandbox['network'].detail}")
    words = {"netns": "network namespace", "seccomp": "seccomp", "landlock": "Landlock TCP"}[mechanism]
    assert words in result.sandbox["network"].mechanism


def test_with_the_network_layer_off_the_probe_reaches_the_local_server(tmp_path, targets):
    got, result = probe(tmp_path, targets, without("network", *ONE_LAYER))
    assert got["connect"] == {"ok": True, "got": 200}
    assert result.sandbox["network"].state == "off"


def test_with_the_environment_layer_off_ordinary_names_leak(tmp_path, targets):
    got, _ = probe(tmp_path, targets, without("environment"))
    assert got["environment"]["ok"]  # the old denylist keeps only secret-looking names out
    assert got["environment"]["got"]["DATABASE_URL"] == "postgres://u:pw@h/db"
    on, _ = probe(tmp_path / "on", targets, without("network", "filesystem"))
    assert not on["environment"]["ok"]  # the allowlist alone stops it


# ------------------------------------------------------------------- processes, UNIX sockets, the user's JIT caches
@pytest.fixture
def escapes(tmp_path, targets, monkeypatch):
    """Targets of the escapes a same-uid worker would have: the harness's /proc entry, a UNIX socket server, the
    user's Triton cache (a folder standing in for it), and a file a surviving grandchild keeps touching."""
    import socket

    path = str(tmp_path / "server.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(b"a shell")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    user_cache = tmp_path / "user-triton-cache"
    user_cache.mkdir()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(user_cache))
    neighbour = Path(f"/dev/shm/kernelskill-test-neighbour-{os.getpid()}-{tmp_path.name}")  # another runner's file
    neighbour.write_text("a neighbour's file")
    neighbour.chmod(0o644)
    name = f"ks-surv-{os.getpid() % 10000}"
    yield {**targets, "PROBE_HARNESS_PID": str(os.getpid()), "PROBE_UNIX_SOCKET": path,
           "PROBE_USER_CACHE": str(user_cache), "PROBE_SURVIVOR_NAME": name, "PROBE_SHM_FILE": str(neighbour)}
    srv.close()
    for pid in named(name):
        os.kill(pid, 9)
    neighbour.unlink(missing_ok=True)
    Path(f"{neighbour}.planted").unlink(missing_ok=True)


def _survives(name: str) -> bool:
    """Whether the probe's grandchild still runs a second after the review ended."""
    import time

    time.sleep(1.2)
    return bool(named(name))


@needs_landlock
def test_a_same_uid_worker_reaches_no_process_socket_or_cache_of_the_user(tmp_path, escapes):
    got, result = probe(tmp_path, escapes)
    assert got["survivor"]["ok"]  # it did start its grandchild ...
    assert not _survives(escapes["PROBE_SURVIVOR_NAME"])  # ... which died with the worker
    assert not got["harness_cmdline"]["ok"], got["harness_cmdline"]
    assert not got["unix_connect"]["ok"], got["unix_connect"]
    assert not got["user_cache"]["ok"] and not (Path(escapes["PROBE_USER_CACHE"]) / "planted.py").exists()
    assert got["pid"] == 2 and result.sandbox["processes"].state == "active"  # pid 1 is its init
    # its /dev/shm is its own: another runner's file is not there, and what it left there went with it
    assert not got["shared_memory"]["ok"] and "FileNotFoundError" in got["shared_memory"]["got"]
    assert not Path(escapes["PROBE_SHM_FILE"] + ".planted").exists()


@needs_landlock
def test_with_the_processes_layer_off_a_grandchild_outlives_the_review_and_proc_shows_the_harness(tmp_path, escapes):
    got, result = probe(tmp_path, escapes, without("processes"))
    assert _survives(escapes["PROBE_SURVIVOR_NAME"])
    assert got["harness_cmdline"]["ok"], got["harness_cmdline"]
    assert got["shared_memory"] == {"ok": True, "got": "a neighbour's file"}  # the machine's /dev/shm, shared
    assert result.sandbox["processes"].state == "off"


@needs_landlock
def test_with_the_network_layer_off_a_unix_socket_server_answers(tmp_path, escapes):
    got, _ = probe(tmp_path, escapes, without("network", *ONE_LAYER))
    assert got["unix_connect"] == {"ok": True, "got": "a shell"}


@needs_landlock
def test_the_jit_caches_a_worker_writes_are_never_the_users(tmp_path, escapes, monkeypatch):
    # the guard: caches.runner_caches gives the worker caches of the sandbox's own; with the user's instead, the
    # probe plants a file where the user's own (unconfined) Triton programs would load it
    real = confine.runner_caches
    monkeypatch.setattr(confine, "runner_caches",
                        lambda dropped, own=True, reference=False, owner=None: real(dropped, own=False))
    got, _ = probe(tmp_path, escapes, without(*ONE_LAYER))
    assert got["user_cache"]["ok"], got["user_cache"]


# ----------------------------------------------------------------------------------------------------- not root
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK), reason="needs root and a system Python")
@pytest.mark.parametrize("user", [True, False])
def test_dropping_root_keeps_roots_files_closed(tmp_path, user):
    """The user layer alone (a system Python, which uid 65534 can run): on, a file only root may read stays closed
    and the process is nobody; off, it reads the file as root."""
    secret = tmp_path / "root-only.txt"
    secret.write_text("root's secret")
    secret.chmod(0o600)
    if not confine._reachable(SRC, confine.SANDBOX_UID, confine.SANDBOX_GID):
        pytest.skip(f"{SRC} is not readable by uid {confine.SANDBOX_UID}")
    spec = {"layers": {"network": False, "filesystem": False, "environment": False, "user": user}, "mode": "worker",
            "drop": {"uid": confine.SANDBOX_UID, "gid": confine.SANDBOX_GID}}
    code = ("import json, os, sys; from kernelskill.review import confine; r = confine.apply(json.loads(sys.argv[1]))\n"
            "try:\n    got = open(sys.argv[2]).read()\nexcept OSError as e:\n    got = type(e).__name__\n"
            "print(json.dumps([r['user'], os.getuid(), got]))")
    done = subprocess.run([SYSTEM_PYTHON, "-I", "-c", f"import sys; sys.path.insert(0, {SRC!r})\n{code}",
                           json.dumps(spec), str(secret)], capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    layer, uid, got = json.loads(done.stdout)
    if user:
        assert layer["state"] == "active" and uid == confine.SANDBOX_UID and got == "PermissionError"
    else:
        assert layer["state"] == "off" and uid == 0 and got == "root's secret"


def test_a_root_harness_says_why_it_cannot_drop_root(monkeypatch, tmp_path):
    """Where uid 65534 cannot reach the Python installation (a pyenv under /root), the layer is reported
    unavailable with the folder named, and the child is not asked to drop."""
    if os.geteuid() != 0:
        pytest.skip("runs as root only")
    monkeypatch.setattr(confine, "_reachable", lambda path, uid, gid: not str(path).startswith(sys.prefix))
    env = confine.environment(None, False, Sandbox())
    spec = json.loads(env[confine.SPEC_VAR])
    assert spec["drop"] is None and sys.prefix in spec["drop_why"]


# ------------------------------------------------------------------------------------------ environment and switches
def test_the_allowlist_keeps_what_builds_need_and_drops_the_rest(monkeypatch):
    keep = {"PATH": "/usr/bin", "CUDA_HOME": "/usr/local/cuda", "TORCH_CUDA_ARCH_LIST": "9.0", "LD_LIBRARY_PATH": "/x",
            "TRITON_CACHE_DIR": "/c", "CXX": "g++", "LANG": "C.UTF-8", "KERNELSKILL_HARMLESS": "1"}
    drop = {"DATABASE_URL": "postgres://u:pw@h/db", "COMPANY_DB": "x", "OPENAI_API_KEY": "sk-x",
            "KERNELSKILL_REMOTE": "https://user:pw@host/path", "SSH_AUTH_SOCK": "/tmp/agent"}
    for name, value in {**keep, **drop}.items():
        monkeypatch.setenv(name, value)
    env = confine.environment({"CUDA_VISIBLE_DEVICES": "1"}, False, Sandbox())
    assert not drop.keys() & env.keys()
    assert all(env[name] == value for name, value in keep.items() if name not in ("TRITON_CACHE_DIR",))
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    # the JIT caches are the sandbox's, never the user's own (which the user's unconfined programs load)
    assert env["TRITON_CACHE_DIR"] != "/c" and env["TRITON_CACHE_DIR"].startswith("/var/tmp/kernelskill-sandbox-")


def test_pythonpath_entries_are_made_absolute(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "src")
    env = confine.environment(None, False, Sandbox())
    assert str(tmp_path / "src") in env["PYTHONPATH"].split(os.pathsep)


@pytest.mark.parametrize("raw,expected", [
    ("", Sandbox()), ("on", Sandbox()),
    ("off", Sandbox(network=False, filesystem=False, environment=False, user=False, processes=False)),
    ("network,environment", Sandbox(filesystem=False, user=False, processes=False)),
])
def test_the_sandbox_switch(monkeypatch, raw, expected):
    from kernelskill.settings import ReviewSettings

    monkeypatch.setenv("KERNELSKILL_SANDBOX", raw)
    assert ReviewSettings().sandbox == expected


def test_an_unknown_sandbox_layer_is_a_one_line_error(monkeypatch):
    from kernelskill.errors import KernelSkillError

    monkeypatch.setenv("KERNELSKILL_SANDBOX", "network,disk")
    with pytest.raises(KernelSkillError, match="unknown layer disk"):
        Sandbox.from_env()


def test_a_layer_that_cannot_be_applied_stops_the_process_with_the_fix_and_the_opt_out():
    # a worker-mode process asks for a PID namespace, which only the zygote gives: started any other way, it refuses
    # to run rather than run with less (remove `refuse_unavailable` and it runs)
    env = confine.environment(None, False, Sandbox())
    program = ("import json\nfrom kernelskill.review import confine\ntry:\n    confine.apply()\n"
               "    print('ran unconfined')\nexcept confine.Unconfined as e:\n    print(json.dumps(str(e)))\n")
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60,
                         cwd=confine.scratch_environment(env)[1])
    assert out.returncode == 0, out.stderr
    message = json.loads(out.stdout.strip().splitlines()[-1])
    first = message.splitlines()[0]  # (with the user layer too, where it leans on the processes layer)
    assert first.startswith("the sandbox cannot confine candidates here: layer") and "processes" in first
    assert "- processes: the process was not started by the zygote" in message and "fix:" in message
    assert "KERNELSKILL_SANDBOX=network,filesystem,environment" in message  # the explicit way on, without it


def test_a_review_that_cannot_be_confined_raises_a_sandbox_error(monkeypatch):
    from kernelskill.errors import SandboxError
    from kernelskill.review import reviewer
    from kernelskill.review.sandbox import WorkerOutcome
    from kernelskill.review.wire import VerdictMessage

    outcome = WorkerOutcome(verdict=VerdictMessage(stage="load", kind="sandbox", error="layer processes unavailable"))
    with pytest.raises(SandboxError, match="layer processes unavailable"):
        reviewer._reference_failed({}, outcome, Path("/nonexistent/log"), 0.1)


def test_network_clients_are_refused_statically():
    from kernelskill.review.static_checks import static_checks

    for source in ("import http.client", "from urllib.request import urlopen", "import requests", "import ssl"):
        assert "static:network" in {c.name for c in static_checks(source)}, source


# --------------------------------------------------------------------------------------- the mechanisms, one by one
def _in_child(body: str) -> dict:
    code = f"import json, os, socket, sys\nsys.path.insert(0, {SRC!r})\nfrom kernelskill.review import confine_os\n{body}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("filtered", [True, False, "connect"])
def test_the_seccomp_filter_allows_unix_sockets_only(filtered, tmp_path):
    server = socket_server(tmp_path / "s.sock")
    got = _in_child(f"""
if {filtered!r} == "connect":
    confine_os.block_sockets(connect=False)
elif {filtered}:
    confine_os.block_sockets()
out = {{}}
for name, family in (("inet", socket.AF_INET), ("inet6", socket.AF_INET6), ("unix", socket.AF_UNIX)):
    try:
        socket.socket(family, socket.SOCK_STREAM).close()
        out[name] = "ok"
    except OSError as e:
        out[name] = e.errno
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect({str(server)!r})
        out["unix_connect"] = "ok"
except OSError as e:
    out["unix_connect"] = e.errno
print(json.dumps(out))""")
    if filtered == "connect":  # a review worker's: no connect() (tmux, ssh-agent and docker servers listen on one)
        assert got == {"inet": 13, "inet6": 13, "unix": "ok", "unix_connect": 111}  # ECONNREFUSED
    elif filtered:
        assert got == {"inet": 13, "inet6": 13, "unix": "ok", "unix_connect": "ok"}  # EACCES
    else:
        assert got == {"inet": "ok", "inet6": "ok", "unix": "ok", "unix_connect": "ok"}


@pytest.mark.parametrize("filtered", [False, "connect"])
def test_a_review_worker_s_filter_keeps_it_on_the_cpus_it_was_given(filtered):
    got = _in_child(f"""
if {filtered!r} == "connect":
    confine_os.block_sockets(connect=False)
try:
    os.sched_setaffinity(0, os.sched_getaffinity(0))
    print(json.dumps({{"moved": "ok"}}))
except OSError as e:
    print(json.dumps({{"moved": e.errno}}))""")
    assert got == {"moved": 13 if filtered else "ok"}


def socket_server(path: Path) -> Path:
    import socket

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    threading.Thread(target=lambda: [srv.accept() for _ in range(8)], daemon=True).start()
    return path


def test_killing_a_worker_tree_reaches_processes_in_their_own_sessions():
    from kernelskill.review.sandbox import descendants, kill_tree

    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               "subprocess.Popen(['sleep', '300'], start_new_session=True)\ntime.sleep(300)"],
                              start_new_session=True)
    for _ in range(100):
        found = descendants(parent.pid)
        if found:
            break
        threading.Event().wait(0.05)
    assert found, "the child did not start"
    kill_tree(parent.pid)
    parent.wait(timeout=10)
    for pid in found:
        for _ in range(100):
            if not process_running(pid):
                break
            threading.Event().wait(0.05)
        assert not process_running(pid), f"{pid} survived"



def test_the_worker_runs_in_a_scratch_folder_that_goes_with_it(tmp_path):
    from kernelskill.review.sandbox import WorkerProcess, clean_environment

    worker = WorkerProcess(clean_environment(sandbox=Sandbox()), "cpu", tmp_path / "log")
    scratch = worker.scratch
    assert scratch.is_dir() and worker.env["HOME"] == str(scratch / "home") and worker.env["TMPDIR"] == str(scratch / "tmp")
    worker.kill()
    assert not scratch.exists()



def _mount_namespace() -> bool:
    probe = "from kernelskill.review import confine_os; confine_os.private_tmp([])"
    return subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": SRC},
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not _mount_namespace(), reason="no mount namespace here (needs root)")
@pytest.mark.parametrize("filesystem", [True, False])
def test_ncu_and_its_program_get_a_tmp_of_their_own(filesystem):
    # ncu's injected code writes to /tmp whatever TMPDIR says, so the profiled program is given /tmp; on the H200
    # that let the probe read a secret planted in /tmp and write beside it. With the filesystem layer the wrapper
    # gives ncu and the program a /tmp of their own holding only their work folder (bound back in)
    import shutil
    import tempfile

    planted = Path(tempfile.mkdtemp(prefix="kernelskill-planted-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="kernelskill-ncu-work-", dir="/tmp"))
    try:
        (planted / "secret.txt").write_text("the planted secret")
        env = confine.environment(None, False, Sandbox(network=False, filesystem=filesystem, user=False),
                                  mode="ncu-target", write=[str(work)])
        program = ("import os, sys\nprint(os.path.exists(sys.argv[1]))\n"
                   "open(os.path.join(sys.argv[2], 'report.txt'), 'w').write('kept')\n")
        out = subprocess.run([sys.executable, "-m", "kernelskill.review.confine_ncu", "--", sys.executable, "-c",
                              program, str(planted / "secret.txt"), str(work)],
                             env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [str(not filesystem)]  # the planted secret: out of sight only with the layer
        assert (work / "report.txt").read_text() == "kept"  # the work folder is the real one: ncu's report lands
    finally:
        shutil.rmtree(planted, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.skipif(_landlock() < 3, reason="Landlock's truncate right needs ABI 3")
def test_a_sandboxed_process_may_rewrite_its_own_thread_names():
    # the CUDA driver names its threads with fopen("/proc/self/task/<tid>/comm", "wb") at cuInit; "wb" truncates,
    # and without Landlock's truncate right on the process's own /proc entries cuInit failed with 304 on the H200
    env, scratch = confine.scratch_environment(confine.environment(None, False, Sandbox(network=False, user=False,
                                                                                          processes=False)))
    program = ("import threading\nfrom kernelskill.review import confine\nconfine.apply()\n"
               "open(f'/proc/self/task/{threading.get_native_id()}/comm', 'wb').write(b'cuda-worker')\n"
               "print(open(f'/proc/self/task/{threading.get_native_id()}/comm').read().strip())\n")
    out = subprocess.run([sys.executable, "-c", program], env=env, cwd=scratch, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cuda-worker"


@pytest.mark.skipif(not _mount_namespace(), reason="no mount namespace here (needs root)")
def test_a_cache_reached_through_a_link_in_tmp_is_there_under_ncu():
    # on the H200 a capture's TORCH_EXTENSIONS_DIR was /tmp/run/torch_extensions -> /tmp/other/torch_extensions; in
    # ncu's private /tmp only the real folder was bound back, the link was gone and every CUDA case failed to load
    import shutil
    import tempfile

    real = Path(tempfile.mkdtemp(prefix="kernelskill-real-cache-", dir="/tmp"))
    run = Path(tempfile.mkdtemp(prefix="kernelskill-run-", dir="/tmp"))
    try:
        (real / "built.so").write_text("an extension")
        (run / "cache").symlink_to(real)
        env = confine.environment({"TORCH_EXTENSIONS_DIR": str(run / "cache")}, False,
                                  Sandbox(network=False, filesystem=True, user=False), mode="ncu-target")
        program = "import sys\nprint(open(sys.argv[1] + '/built.so').read())\n"
        out = subprocess.run([sys.executable, "-m", "kernelskill.review.confine_ncu", "--", sys.executable, "-c",
                              program, str(run / "cache")], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "an extension"
    finally:
        shutil.rmtree(real, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)


def test_a_zygote_is_shared_by_its_import_variables_and_shows_its_children_no_other(tmp_path, monkeypatch):
    """Zygotes are kept apart by the variables imports may read, so a variable a caller sets for one child alone
    starts none (each costs seconds of CPU). A child's /proc/self/environ is the environment its zygote was started
    with: it must hold those variables only, never another caller's."""
    import uuid

    from kernelskill.review.confined import run_confined, zygote_for, zygote_key
    from kernelskill.review.sandbox import clean_environment
    from kernelskill.review.zygote import RESULT_FD

    monkeypatch.setenv("KERNELSKILL_SANDBOX", "off")
    (tmp_path / "ks_environ_probe.py").write_text(
        "import os, sys\nos.write(int(sys.argv[1]), open('/proc/self/environ', 'rb').read())\n")
    tag = uuid.uuid4().hex  # a zygote of this test's own, started by the first call
    src = str(Path(confine.__file__).resolve().parents[2])

    def env(**child_only):
        return clean_environment({"KERNELSKILL_TEST_TAG": tag, "PYTHONPATH": f"{src}:{tmp_path}", **child_only})

    first, second = env(KS_FIRST_ONLY="alpha"), env(KS_SECOND_ONLY="beta")
    assert zygote_key(first) == zygote_key(second) != zygote_key(env(TORCH_LOGS="+dynamo"))
    assert zygote_key(first) == zygote_key({**first, confine.SPEC_VAR: "{}"})  # the spec is read by children only
    done = run_confined("ks_environ_probe", [RESULT_FD], first, timeout=120)
    assert done.code == 0, done.output.decode(errors="replace")
    zygote = zygote_for(second)
    done = run_confined("ks_environ_probe", [RESULT_FD], second, timeout=120)
    assert done.code == 0, done.output.decode(errors="replace")
    assert zygote_for(second) is zygote  # the same zygote served both
    shown = dict(item.split(b"=", 1) for item in done.result.split(b"\0") if b"=" in item)
    assert shown.get(b"KERNELSKILL_TEST_TAG") == tag.encode()
    assert b"KS_FIRST_ONLY" not in shown and b"KS_SECOND_ONLY" not in shown, sorted(shown)


def test_a_zygote_handed_out_is_not_closed_by_another_callers_eviction(tmp_path, monkeypatch):
    """Between taking a zygote and spawning from it, a caller's zygote has no child yet; another caller's zygote
    past the cap must not close it then (on the H100, 12 parallel builds and probes lost 72 of 100 problem probes
    that way: "the zygote is gone"). The reference runner's caches differ from the candidate's, and they share a
    zygote all the same."""
    import uuid

    from kernelskill.review import confined
    from kernelskill.review.confined import run_confined, zygote_for, zygote_key
    from kernelskill.review.sandbox import clean_environment
    from kernelskill.review.zygote import RESULT_FD

    monkeypatch.setenv("KERNELSKILL_SANDBOX", "off")
    monkeypatch.setattr(confined, "MAX_ZYGOTES", 1)
    (tmp_path / "ks_exit_probe.py").write_text("import os, sys\nos.write(int(sys.argv[1]), b'ran')\n")
    src = str(Path(confine.__file__).resolve().parents[2])

    def env(tag: str, reference: bool = False):
        return clean_environment({"KERNELSKILL_TEST_TAG": tag, "PYTHONPATH": f"{src}:{tmp_path}"},
                                 reference=reference)

    first, other = env(uuid.uuid4().hex), env(uuid.uuid4().hex)
    assert zygote_key(first) == zygote_key(env(dict(first)["KERNELSKILL_TEST_TAG"], reference=True))
    taken = zygote_for(first, reserve=True)  # a caller about to spawn from it
    try:
        zygote_for(other)  # past the cap: the least recently used idle zygote goes
        assert taken.alive(), "a zygote handed out for a spawn was closed under its caller"
        done = run_confined("ks_exit_probe", [RESULT_FD], first, timeout=120)
        assert done.code == 0 and done.result == b"ran", done.output.decode(errors="replace")
    finally:
        taken.handed -= 1
        taken.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping root needs root")
def test_a_process_that_drops_root_still_dies_with_its_parent():
    """The kernel clears the parent-death signal when a process's uid changes; a runner that dropped root must still
    die with the process that started it (a uid-65534 runner was left asleep under init after CI's tests)."""
    import signal
    import textwrap
    import time

    src = str(Path(confine.__file__).resolve().parents[2])
    parent = textwrap.dedent(f"""
        import ctypes, os, signal, sys, time
        sys.path.insert(0, {src!r})
        from kernelskill.review import confine_os
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            quiet = os.open(os.devnull, os.O_WRONLY)  # the test reads the parent's output to its end
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # as the zygote's children arm it
            confine_os.drop_root(65534, 65534)
            os.write(w, b"x")
            time.sleep(60)
            os._exit(0)
        os.read(r, 1)  # the child has dropped root
        print(child, flush=True)
        os._exit(0)  # the parent dies; its child must follow
        """)
    done = subprocess.run([sys.executable, "-c", parent], timeout=60, check=True, capture_output=True, text=True)
    pid = int(done.stdout.strip())
    for _ in range(40):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    break
        except OSError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"the process that dropped root (pid {pid}) outlived its parent")
