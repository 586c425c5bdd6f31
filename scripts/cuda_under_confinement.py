"""Which confinement mechanism keeps the CUDA driver from starting? Each case runs in a fresh process: apply one
mechanism (review/confine_os.py), then make a CUDA tensor. Prints one line per case.

    PYTHONPATH=src python3 scripts/cuda_under_confinement.py
"""

from __future__ import annotations

import subprocess
import sys

CASES = {
    "nothing": "",
    "seccomp: no connect()": "osl.block_sockets(connect=False)",
    "seccomp: AF_UNIX only": "osl.block_sockets()",
    "PID namespace + /proc": "osl.process_namespace()\npid = os.fork()\nif pid:\n    _, st = os.waitpid(pid, 0)\n"
                             "    sys.exit(os.WEXITSTATUS(st))\nosl.private_proc()",
    "network namespace": "osl.network_namespace(user_namespace=False)",
}


def main() -> None:
    for name, setup in CASES.items():
        code = ("import os, sys\nfrom kernelskill.review import confine_os as osl\n" + setup +
                "\nimport torch\ntry:\n    torch.zeros(1, device='cuda')\n    print('ok')\n"
                "except Exception as e:\n    print(type(e).__name__, str(e)[:160])\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        print(f"{name:28} {(done.stdout.strip() or done.stderr.strip()[-200:])}", flush=True)


if __name__ == "__main__":
    main()
