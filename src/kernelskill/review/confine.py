"""The sandbox around every process that runs candidate code: review workers and the profiler's driver.

Five layers, each reported as active (with the mechanism), off (turned off by the settings) or unavailable (why):

- environment: an allowlist of variables (what CUDA, PyTorch, Triton, compilers and the harness read), and nothing
  whose name looks like a credential or whose value holds a password in a URL. Applied by the parent.
- network: no socket but AF_UNIX (a review worker or the profiler's driver: none at all). A new network namespace
  where the kernel permits one (root, or unprivileged user namespaces), else a seccomp filter on socket(), else
  Landlock's TCP rules (bind and connect only; ABI 4); the seccomp filter on socket() itself for no socket at all.
- filesystem (Landlock): write only the process's scratch folder (its HOME and TMPDIR point there), /dev/shm and
  the build and JIT caches (the sandbox's, never the user's; a reference runner's are a set no candidate's runner
  is granted); read only the Python installation and import path, system libraries and toolchains, the CUDA
  toolkit, /proc, /sys and the GPU's device files. Not the user's home, not other run folders, not /etc beyond what
  the dynamic linker and user lookups read.
- user: a harness running as root drops the worker to uid/gid 65534 (nobody) where everything the worker reads is
  reachable for that user. Where it cannot (Python under /root) or need not (an ordinary user), the worker keeps
  the harness's uid without capabilities, and the layer holds only when the others hold what a uid of its own
  would: Landlock, its own PID namespace and a filter that refuses connect() (no tmux, ssh-agent or docker server).
- processes (review workers, started by the zygote): a PID namespace of its own, pid 1 being the worker, with a
  /proc that lists only its processes and an empty /dev/shm: whatever the candidate starts or leaves dies with it.
A layer the settings ask for that cannot be put in place stops the process before any candidate code runs
(`Unconfined`, with what to do and the explicit opt-out); a layer is never silently dropped.

The parent builds a spec (`environment()`), passes it in the environment, and the child calls `apply()` as its first
act, while it is still single-threaded.
"""

from __future__ import annotations

import json
import os
import re
import site
import stat
import sys
import tempfile
from pathlib import Path

from kernelskill.review import confine_os as osl
from kernelskill.review.caches import (CACHE_VARS, HEADERS_VAR, SANDBOX_GID, SANDBOX_UID, runner_caches,  # noqa: F401
                                       sandbox_cache_root)
from kernelskill.review.confine_report import FIX, LAYERS, Unconfined, describe, layer, refuse_unavailable  # noqa: F401

SPEC_VAR = "KERNELSKILL_SANDBOX_SPEC"
SCRATCH_VAR = "KERNELSKILL_SCRATCH"
NO_UNIX_MODES = ("worker", "driver")  # processes that need no socket at all (ncu and its target talk over TCP)
PROCESSES_LAYER: dict | None = None  # set by the zygote in the child it forked, before `apply` runs
NETWORK_MECHANISMS = ("netns", "seccomp", "landlock")  # tried in this order (KERNELSKILL_SANDBOX_NETWORK narrows it)
NCU_PORTS = range(49152, 49152 + 64)  # ncu's default --port and --max-connections: how it reaches its target

# Variables whose names look like credentials never reach candidate code, whatever list they are on.
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE)", re.IGNORECASE)
URL_CREDENTIALS = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:[^/@\s]*@", re.IGNORECASE)
ALLOWED_NAMES = {
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "HOME", "TMPDIR", "SHELL", "LD_LIBRARY_PATH",
    "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "CC", "CXX", "CUDAHOSTCXX", "CFLAGS",
    "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAX_JOBS", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "SOURCE_DATE_EPOCH", "XDG_CACHE_HOME",
}
ALLOWED_PREFIXES = (
    "LC_", "PYTHON", "CUDA_", "CUDNN_", "CUBLAS", "NVIDIA_", "NV_", "NVCC_", "TORCH", "PYTORCH_", "TRITON_",
    "KERNELSKILL_", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "CCACHE_", "HIP_", "ROCM_", "HSA_",
)

# Read (and execute) for everyone in the sandbox: the system's programs and libraries, toolchains, CUDA.
SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/opt", "/proc", "/sys")
ETC_READ = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group",
            "/etc/nsswitch.conf", "/etc/localtime", "/etc/timezone", "/etc/os-release", "/etc/alternatives")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


# ------------------------------------------------------------------------------------------------ parent: environment
def allowed_variable(name: str, value: str) -> bool:
    if SECRET_NAME.search(name) or URL_CREDENTIALS.search(value):
        return False
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def environment(extra: dict[str, str] | None, interpret: bool, sandbox, mode: str = "worker",
                read: list[str] | None = None, write: list[str] | None = None,
                reference: bool = False, owner: str | None = None) -> dict[str, str]:
    """The environment of a sandboxed process, with its spec (`SPEC_VAR`) in it. `sandbox` is the settings'
    `Sandbox`; `extra` comes from the caller, trusted (CUDA_VISIBLE_DEVICES); `reference`: a reference runner's;
    `owner`: the runner of the candidate whose source has this digest (caches.owner_key: caches of its own)."""
    layers = {name: bool(getattr(sandbox, name)) for name in LAYERS}
    layers["processes"] = layers["processes"] and mode == "worker"  # only the zygote's children get a PID namespace
    if layers["environment"]:
        env = {k: v for k, v in os.environ.items() if allowed_variable(k, v)}
    else:
        env = {k: v for k, v in os.environ.items() if not SECRET_NAME.search(k)}
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    # the child runs in its scratch folder: import paths must not depend on the caller's working directory
    src = str(Path(__file__).resolve().parents[2])
    paths = [src, *(str(Path(p).resolve()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    drop, drop_why = _drop_plan(layers, [*(read or []), *(str(Path(w).parent) for w in write or [])])
    for path in (write or []) if drop else ():  # the child's own output folders (a profile's work folder)
        os.chown(path, drop["uid"], drop["gid"])
    env["PYTHONUSERBASE"] = os.environ.get("PYTHONUSERBASE") or site.getuserbase()  # HOME changes below
    shared_caches = None
    try:
        env.update(runner_caches(drop is not None, reference=reference, owner=owner))
    except OSError as exc:  # no folder of the sandbox's own for its caches: the user's, and the user layer says so
        shared_caches = f"no cache folder of the sandbox's own ({exc}); set KERNELSKILL_SANDBOX_CACHE to a folder"
        if drop:
            drop, drop_why = None, shared_caches
        env.update(runner_caches(False, own=False))
    env.update(extra or {})
    env[SPEC_VAR] = json.dumps({"layers": layers, "mode": mode, "read": [*_toolchain_dirs(), *(read or [])],
                                "write": list(write or []), "drop": drop, "drop_why": drop_why, "shared_caches":
                                shared_caches, "network_order": network_order()}, sort_keys=True)
    return env


def network_order() -> list[str]:
    """The network mechanisms to try, in order: all of them, or those KERNELSKILL_SANDBOX_NETWORK names (to debug or
    measure one, e.g. `seccomp`)."""
    raw = os.environ.get("KERNELSKILL_SANDBOX_NETWORK", "").strip().lower()
    order = [m.strip() for m in raw.split(",") if m.strip()] or list(NETWORK_MECHANISMS)
    unknown = [m for m in order if m not in NETWORK_MECHANISMS]
    if unknown:
        from kernelskill.errors import KernelSkillError

        raise KernelSkillError(f"KERNELSKILL_SANDBOX_NETWORK={raw!r}: unknown {', '.join(unknown)}; name some of "
                               f"{', '.join(NETWORK_MECHANISMS)}")
    return order


def _toolchain_dirs() -> list[str]:
    """The CUDA toolkit and the folders of the compilers on PATH, wherever they are installed."""
    import shutil

    found = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    for tool in ("nvcc", "ncu", "ninja", "c++", "gcc"):
        path = shutil.which(tool)
        if path:
            real = Path(path).resolve()
            found += [str(real.parent.parent) if real.parent.name == "bin" else str(real.parent)]
    found += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)]
    return [p for p in dict.fromkeys(found) if p and _harmless_root(p)]


def _harmless_root(path: str) -> bool:
    """A folder that may be opened for reading: not /, not the user's home nor a folder above it."""
    real = Path(path).resolve()
    home = Path.home().resolve()
    return real != Path("/") and real != home and real not in home.parents


# ----------------------------------------------------------------------------------------------- parent: drop root
def _drop_plan(layers: dict, own: list[str]) -> tuple[dict | None, str | None]:
    """({uid, gid}, None) when the child should drop root, else (None, why not). `own`: files and folders the
    child is given besides Python (a profile's inputs and work folder): they must be reachable too."""
    if not layers["user"] or os.geteuid() != 0:
        return None, None
    for paths, what in ((python_roots(parent=True), "the Python installation or import path"),
                        (own, "a file or folder the process is given")):
        unreachable = next((p for p in paths if not _reachable(p, SANDBOX_UID, SANDBOX_GID)), None)
        if unreachable:
            return None, (f"{unreachable} ({what}) cannot be read by uid {SANDBOX_UID}; keep Python, the packages "
                          "and the files under review outside folders only root can enter, e.g. /root")
    return {"uid": SANDBOX_UID, "gid": SANDBOX_GID}, None


def _reachable(path: str, uid: int, gid: int) -> bool:
    """Whether `uid` could open `path` for reading, judged from the permission bits of it and its folders."""

    def allows(st: os.stat_result, bit: int) -> bool:  # bit: 4 read, 1 search
        if st.st_uid == uid:
            return bool(st.st_mode & (bit << 6))
        if st.st_gid == gid:
            return bool(st.st_mode & (bit << 3))
        return bool(st.st_mode & bit)

    try:
        real = Path(path).resolve()
        for folder in [*reversed(real.parents)]:
            if not allows(folder.stat(), 1):
                return False
        st = real.stat()
        return allows(st, 4) and (not stat.S_ISDIR(st.st_mode) or allows(st, 1))
    except OSError:
        return True  # a path that is not there needs no access


def python_roots(parent: bool = False) -> list[str]:
    """What Python needs to read: its prefixes, the interpreter's folder and every import path entry (the caller's
    working directory left out in the parent: the child runs elsewhere)."""
    cwd = os.getcwd()
    roots = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             str(Path(sys.executable).resolve().parent.parent), str(Path(__file__).resolve().parents[2])]
    roots += [p for p in sys.path if p and not (parent and os.path.abspath(p) == cwd)]
    roots += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [p for p in dict.fromkeys(os.path.abspath(r) for r in roots) if os.path.exists(p) and _harmless_root(p)]


# ------------------------------------------------------------------------------------------------- parent: scratch
def scratch_environment(env: dict[str, str], base: Path | None = None) -> tuple[dict[str, str], Path]:
    """A fresh scratch folder for one process (its working directory, HOME and TMPDIR when the filesystem layer is
    on), owned by the user the child will run as."""
    spec = json.loads(env.get(SPEC_VAR) or "{}")
    scratch = Path(tempfile.mkdtemp(prefix="kernelskill-worker-", dir=base))
    env = {**env, SCRATCH_VAR: str(scratch)}
    for sub in ("home", "tmp"):
        (scratch / sub).mkdir()
    if spec.get("layers", {}).get("filesystem") or spec.get("drop"):  # nobody cannot use root's home either
        env.update(HOME=str(scratch / "home"), TMPDIR=str(scratch / "tmp"))
    if spec.get("drop"):
        for path in (scratch, scratch / "home", scratch / "tmp"):
            os.chown(path, spec["drop"]["uid"], spec["drop"]["gid"])
    return env, scratch


# --------------------------------------------------------------------------------------------------- child: apply
def apply(spec: dict | None = None, strict: bool = True) -> dict[str, dict]:
    """Confine this process as the spec asks; returns each layer's state. Call it before anything starts a thread.
    A process not started by the harness (no spec) is left as it is and gets an empty report. `strict`: raise
    Unconfined when a layer asked for is unavailable (`kernelskill doctor` reports instead)."""
    if spec is None:
        raw = os.environ.get(SPEC_VAR)
        if not raw:
            return {}
        spec = json.loads(raw)
    on, mode = spec["layers"], spec.get("mode", "worker")
    report = {name: layer("off") for name in LAYERS}
    if on["environment"]:
        report["environment"] = layer("active", "allowlist of variables")
    if on.get("processes"):
        report["processes"] = PROCESSES_LAYER or layer("unavailable", "the process was not started by the zygote")
    order = spec.get("network_order") or list(NETWORK_MECHANISMS)
    network, tried = None, []
    if on["network"] and mode == "ncu-target" and spec.get("shared_netns"):
        network = "network namespace shared with ncu (loopback only)"
    elif on["network"] and mode != "ncu-target" and "netns" in order and os.geteuid() == 0:  # before dropping root
        network = _try(lambda: osl.network_namespace(user_namespace=False), "network namespace", tried)
    if on["user"]:
        report["user"] = _drop(spec)
    for mechanism in order if on["network"] and network is None and mode != "ncu-target" else ():
        if mechanism == "netns":  # unprivileged: in a user namespace of its own
            network = _try(osl.network_namespace, "network namespace", tried)
        elif mechanism == "seccomp":
            network = _try(lambda: osl.block_sockets(connect=mode not in NO_UNIX_MODES), "seccomp", tried)
        if network:
            break
    unix = None  # how connections are refused (a worker: no connect() at all, a UNIX socket's included)
    if mode in NO_UNIX_MODES and (on["network"] or on["user"]):
        if network and network.startswith("seccomp"):
            unix = "the same filter"
        else:
            unix = _try(lambda: osl.block_sockets(connect=False), "seccomp (connect)", tried)
    abi = _try(osl.landlock_abi, "Landlock", tried)
    landlock_net = (on["network"] and network is None and "landlock" in order and isinstance(abi, int)
                    and abi >= 4)
    if on["filesystem"] or landlock_net:
        fs = _landlock(spec, abi, filesystem=on["filesystem"], net=landlock_net, tried=tried)
        if on["filesystem"]:
            report["filesystem"] = fs
        if landlock_net and fs["state"] == "active":
            network = ("Landlock TCP rules (bind/connect only to ncu's ports)" if mode == "ncu-target" else
                       "Landlock TCP rules (bind and connect denied; UDP not covered)")
    if on["network"]:
        if network and mode in NO_UNIX_MODES and not unix:
            report["network"] = layer("unavailable", f"{network}, but connect() not refused: "
                                      + next((t for t in tried if t.startswith("seccomp")), "no seccomp"))
        elif network:
            report["network"] = layer("active", network + (f"; no connect() ({unix})" if unix else ""))
        else:
            report["network"] = layer("unavailable", "; ".join(tried))
    if on["user"] and report["user"]["state"] == "unavailable" and mode in NO_UNIX_MODES:
        report["user"] = _same_uid(report, spec, unix, needs_processes=mode == "worker")
    if strict:
        refuse_unavailable(report)
    return report


def _same_uid(report: dict[str, dict], spec: dict, unix: str | None, needs_processes: bool) -> dict:
    """A worker that kept the harness's uid: the user layer holds when the layers that keep a same-uid process off
    the user's files, processes and servers all hold, and its caches are the sandbox's own. The profiler's driver is
    not a zygote child (no PID namespace); it is held by the rest, and says so."""
    why = report["user"].get("detail", "")
    needed = ("filesystem", "processes") if needs_processes else ("filesystem",)
    missing = [name for name in needed if report[name]["state"] != "active"]
    if not unix:
        missing.append("a seccomp filter on connect()")
    if spec.get("shared_caches"):
        missing.append("caches of the sandbox's own")
    if missing:
        return layer("unavailable", f"{why}; and without {', '.join(missing)} the same uid reaches the user's files, "
                                    "processes or servers")
    held = "Landlock, a PID namespace and no connect()" if needs_processes else \
        "Landlock and no connect() (no PID namespace: the profiler's processes are not the zygote's)"
    return layer("active", f"same uid as the harness, held by {held} ({why})")


def _try(fn, name: str, reasons: list[str]):
    try:
        return fn()
    except (osl.Unavailable, OSError) as exc:
        reasons.append(f"{name}: {exc}")
        return None


def _drop(spec: dict) -> dict:
    if os.geteuid() != 0:
        return layer("active", f"not root (uid {os.geteuid()})")
    if spec.get("mode") == "ncu-target" and _profiling_admin_only():
        why = ("kept root: the GPU driver lets only root read performance counters (RmProfilingAdminOnly is 1 or "
               "unknown) and ncu reads them in this process")
        try:
            osl.drop_capabilities(keep=(osl.CAP_SYS_ADMIN,))
            return layer("unavailable", why + "; every capability but CAP_SYS_ADMIN dropped")
        except OSError as exc:
            return layer("unavailable", f"{why}; capabilities kept ({exc})")
    drop, why = spec.get("drop"), spec.get("drop_why") or "no unprivileged user was prepared"
    if drop:
        try:
            osl.drop_root(drop["uid"], drop["gid"])
            return layer("active", f"uid/gid {drop['uid']}/{drop['gid']} (root dropped)")
        except OSError as exc:
            why = f"could not switch to uid {drop['uid']}: {exc}"
    try:  # still root: at least without capabilities (no modules, no tracing, no mounts, no DAC override)
        osl.drop_capabilities()
        why += "; stays uid 0 without capabilities"
    except OSError as exc:
        why += f"; capabilities kept ({exc})"
    return layer("unavailable", why)


def protect_harness(env: dict[str, str]) -> None:
    """Before starting a sandboxed process: make this (the harness) process non-dumpable, so a candidate running as
    the same user cannot read its environment (API keys) through /proc. Landlock does not cover that file."""
    spec = json.loads(env.get(SPEC_VAR) or "{}")
    if spec.get("layers", {}).get("user"):
        try:
            osl.not_dumpable()
        except OSError:
            pass


def _profiling_admin_only() -> bool:
    try:
        text = Path("/proc/driver/nvidia/params").read_text()
    except OSError:
        return True  # not knowable: keep what ncu needs
    return re.search(r"RmProfilingAdminOnly:\s*0\b", text) is None


def _landlock(spec: dict, abi, filesystem: bool, net: bool, tried: list[str]) -> dict:
    if not isinstance(abi, int):
        return layer("unavailable", next((t for t in tried if t.startswith("Landlock")), "no Landlock"))
    mode = spec.get("mode", "worker")
    scopes = 0 if mode == "ncu-target" else osl.SCOPE_ABSTRACT_UNIX_SOCKET | osl.SCOPE_SIGNAL
    try:
        ruleset = osl.Landlock(abi, fs=filesystem, net=net, scopes=scopes)
        if net and mode == "ncu-target":
            for port in NCU_PORTS:
                ruleset.allow_port(port)
        if filesystem:
            _filesystem_rules(ruleset, spec)
        ruleset.restrict()
    except OSError as exc:
        return layer("unavailable", f"Landlock: {exc}")
    if mode == "ncu-target" and filesystem:
        tmp = spec.get("private_tmp")
        return layer("active", f"Landlock ABI {abi}; " + ("/tmp private to ncu and this program" if tmp is True else
                                                          str(tmp or "/tmp shared with the machine")))
    return layer("active", f"Landlock ABI {abi}")


def _filesystem_rules(ruleset: osl.Landlock, spec: dict) -> None:
    read = osl.FS_EXECUTE | osl.FS_READ_FILE | osl.FS_READ_DIR
    device = osl.FS_READ_FILE | osl.FS_WRITE_FILE | osl.FS_IOCTL_DEV
    everything = ruleset.fs
    headers = os.environ.get(HEADERS_VAR)  # the harness's precompiled headers (made by it): read, never written
    headers = headers if headers and os.path.isdir(headers) else None
    for path in (*SYSTEM_READ, *ETC_READ, *python_roots(), *spec.get("read", []), *filter(None, [headers])):
        ruleset.allow(path, read)
    ruleset.allow("/dev", osl.FS_READ_DIR)
    nvidia = [f"/dev/{name}" for name in sorted(os.listdir("/dev")) if name.startswith("nvidia")]
    for path in (*DEVICES, *nvidia):
        ruleset.allow(path, device)
    # its own /proc entries only (thread names, and what the CUDA driver writes there at cuInit: without it, on the
    # H200, cuInit fails with 304 "OS call failed"); writing with fopen(..., "w") also needs the truncate right
    ruleset.allow(f"/proc/{os.getpid()}", osl.FS_WRITE_FILE | osl.FS_TRUNCATE)
    writable = [os.environ.get(SCRATCH_VAR), "/dev/shm", *spec.get("write", [])]
    writable += [os.environ.get(v) for v in CACHE_VARS]
    if spec.get("mode") == "ncu-target":
        writable.append("/tmp")  # ncu's injected code keeps its own files there, whatever TMPDIR says
    for path in filter(None, writable):
        os.makedirs(path, exist_ok=True)
        ruleset.allow(path, everything)


def remember_sources(files: list[tuple[str, str | None]]) -> None:
    """Put the problem's and the candidate's sources (file name, source) into linecache under their file names:
    tracebacks and Triton (which reads a kernel's source through inspect) then never open the files, which the
    sandbox does not grant."""
    import linecache

    for path, source in files:
        if path and source is not None:
            linecache.cache[path] = (len(source), None, source.splitlines(True), path)


def hash_sources_from_memory() -> None:
    """torch.compile (dynamo) hashes the file that holds the code it compiles. The sandbox does not let a worker
    open the problem and candidate files (their sources arrive in the request and sit in linecache), so a file it
    may not read is hashed from that copy. The patch goes in before the worker's snapshots of torch are taken."""
    import linecache
    import zlib

    try:
        from torch._dynamo import pgo
    except ImportError:
        return
    original = getattr(pgo, "_hash_containing_file", None)
    if original is None or getattr(original, "kernelskill", False):
        return
    uncached = getattr(original, "__wrapped__", original)  # torch caches by path; reviews reuse paths

    def hash_containing_file(filepath: str) -> str:
        try:
            return uncached(filepath)
        except PermissionError:
            entry = linecache.cache.get(filepath)
            if not entry or len(entry) < 3:
                return filepath
            return format(zlib.crc32("".join(entry[2]).encode()) & 0xFFFFFFFF, "08x")

    hash_containing_file.kernelskill = True
    pgo._hash_containing_file = hash_containing_file
