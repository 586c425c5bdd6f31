"""Which sandbox layer keeps CUDA from starting on this machine? One child process per layer set, each confined the
way a review worker is, opens the GPU's device files and calls cuInit.

    PYTHONPATH=src python3 scripts/sandbox_layers.py

Prints one line per layer set: the layers' states, whether each /dev/nvidia* file opens read-write, cuInit's result
(0 = success; 304 = "OS call failed", what a refused file access inside the driver gives) and the device count.
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys

from kernelskill.review import confine
from kernelskill.settings import Sandbox

CHILD = r"""
import ctypes, glob, json, os
from kernelskill.review import confine
report = confine.apply()
out = {"layers": {k: v["state"] for k, v in report.items()}, "uid": os.geteuid()}
for path in sorted(glob.glob("/dev/nvidia*")):
    try:
        os.close(os.open(path, os.O_RDWR))
        out[path] = "opens"
    except OSError as exc:
        out[path] = exc.strerror
try:
    cuda = ctypes.CDLL("libcuda.so.1")
    out["cuInit"] = cuda.cuInit(0)
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    out["devices"] = count.value
except OSError as exc:
    out["libcuda"] = str(exc)
print("RESULT " + json.dumps(out))
"""

LAYERS = ("network", "filesystem", "environment", "user")


def main() -> int:
    print("device files:", ", ".join(sorted(glob.glob("/dev/nvidia*"))) or "none")
    cases = {"all": Sandbox(), "off": Sandbox(**{n: False for n in LAYERS})}
    cases.update({f"only {name}": Sandbox(**{n: n == name for n in LAYERS}) for name in LAYERS})
    failed = False
    for label, sandbox in cases.items():
        env, scratch = confine.scratch_environment(confine.environment(None, False, sandbox))
        run = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=scratch, capture_output=True, text=True,
                             timeout=120)
        line = next((x for x in run.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{label:17s} the child failed (exit {run.returncode}): {run.stderr.strip()[-400:]}")
            failed = True
            continue
        result = json.loads(line.removeprefix("RESULT "))
        failed |= result.get("cuInit", 0) != 0
        print(f"{label:17s} {json.dumps(result)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
