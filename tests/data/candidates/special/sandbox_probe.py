"""A correct p01 candidate that first tries every escape the sandbox must stop and prints one JSON line saying what
happened to each. The targets come from PROBE_* variables the test passes (a caller's own variables reach the
worker): a planted secret file, a file to create outside the scratch folder, the user's home, a local HTTP server.
The static checks would refuse it (http.client); tests turn them off to reach the sandbox itself."""
import http.client
import json
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _try(action):
    try:
        return {"ok": True, "got": action()}
    except Exception as exc:  # each escape's failure is the result
        return {"ok": False, "got": f"{type(exc).__name__}: {exc}"}


def _read_secret():
    with open(os.environ["PROBE_SECRET_FILE"]) as f:
        return f.read()


def _write_outside():
    with open(os.environ["PROBE_OUTSIDE_FILE"], "w") as f:
        f.write("written by the candidate")
    return "written"


def _list_home():
    return len(os.listdir(os.environ["PROBE_HOME"]))


def _connect():
    conn = http.client.HTTPConnection("127.0.0.1", int(os.environ["PROBE_PORT"]), timeout=5)
    conn.request("GET", "/")
    return conn.getresponse().status


def _environment():
    seen = {name: os.environ[name] for name in ("DATABASE_URL", "OPENAI_BASE_URL", "COMPANY_DB") if name in os.environ}
    if not seen:
        raise LookupError("no secret variable is visible")
    return seen


def _harness_environ():
    with open(f"/proc/{os.getppid()}/environ", "rb") as f:
        return len(f.read())


def _harness_cmdline():
    with open(f"/proc/{os.environ['PROBE_HARNESS_PID']}/cmdline", "rb") as f:
        return len(f.read())


def _unix_connect():
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(os.environ["PROBE_UNIX_SOCKET"])
        return s.recv(16).decode()


def _user_cache():
    with open(os.path.join(os.environ["PROBE_USER_CACHE"], "planted.py"), "w") as f:
        f.write("print('run by the user later')\n")
    return "written"


def _survivor():
    # a grandchild in a session of its own, orphaned at once, named PROBE_SURVIVOR_NAME (the name /proc/<pid>/comm
    # shows the harness); it sleeps for two minutes
    import ctypes
    import time

    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, os.environ["PROBE_SURVIVOR_NAME"].encode(), 0, 0, 0)  # PR_SET_NAME
        os.setsid()
        if os.fork() == 0:
            time.sleep(120)
        os._exit(0)
    os.wait()
    return "started"


def _shared_memory():
    # what another process left in /dev/shm, then a file of its own there for the next one
    with open(os.environ["PROBE_SHM_FILE"]) as f:
        got = f.read()
    with open(os.environ["PROBE_SHM_FILE"] + ".planted", "w") as f:
        f.write("left by the candidate")
    return got


OPTIONAL = {"harness_cmdline": ("PROBE_HARNESS_PID", _harness_cmdline), "unix_connect": ("PROBE_UNIX_SOCKET", _unix_connect),
            "user_cache": ("PROBE_USER_CACHE", _user_cache), "survivor": ("PROBE_SURVIVOR_NAME", _survivor),
            "shared_memory": ("PROBE_SHM_FILE", _shared_memory)}
PROBES = {
    "read_secret": _try(_read_secret),
    "write_outside": _try(_write_outside),
    "list_home": _try(_list_home),
    "connect": _try(_connect),
    "environment": _try(_environment),
    "harness_environ": _try(_harness_environ),
    "uid": os.getuid(),
    "pid": os.getpid(),
    **{name: _try(fn) for name, (var, fn) in OPTIONAL.items() if var in os.environ},
}
print("sandbox-probe: " + json.dumps(PROBES), flush=True)
# ---- end of the probe (scripts/sandbox_probe.py puts the lines above in front of other candidates) ----


@triton.jit
def _gelu_chain_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    y = tl.load(x_ptr + offs, mask=mask, other=0.0) * 2.0 + 1.0
    tl.store(out_ptr + offs, 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _gelu_chain_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
