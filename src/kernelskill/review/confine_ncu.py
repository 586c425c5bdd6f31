"""ncu and the program it profiles, confined together: ncu has to reach its program (over loopback) and write to /tmp,
so the two share a network namespace with only loopback and a /tmp of their own. Run as
`python -m kernelskill.review.confine_ncu -- ncu ARGS...`; the program's own layers are applied by confine.apply()
in its mode "ncu-target", which reads what this wrapper could set up from the spec."""

from __future__ import annotations

import json
import os
import sys

from kernelskill.review import confine_os as osl
from kernelskill.review.confine import CACHE_VARS, SCRATCH_VAR, SPEC_VAR, python_roots


def _ncu_keep(spec: dict) -> list[str]:
    """What the profiled program needs under /tmp: its inputs and work folder, its scratch, caches and Python."""
    env = os.environ
    return [*spec.get("read", []), *spec.get("write", []), *python_roots(),
            *(env.get(v, "") for v in (SCRATCH_VAR, "HOME", "TMPDIR", *CACHE_VARS))]


def exec_for_ncu(argv: list[str]) -> None:
    """`python -m kernelskill.review.confine_ncu -- CMD...`: run CMD (ncu) and the program it starts in a network
    namespace with only loopback (network layer), and with a /tmp of their own holding only what the program needs
    (filesystem layer: ncu's injected code insists on writing to /tmp, so the program is given /tmp, and this keeps
    everybody else's files there out of its reach). What cannot be had is recorded for the program's report."""
    spec = json.loads(os.environ.get(SPEC_VAR) or "{}")
    layers = spec.get("layers", {})
    if layers.get("network", True):
        try:
            osl.network_namespace(loopback=True)
            spec["shared_netns"] = True
        except (osl.Unavailable, OSError) as exc:
            spec["shared_netns"] = False
            print(f"kernelskill: no network namespace for ncu ({exc})", file=sys.stderr)
    if layers.get("filesystem", True):
        try:
            osl.private_tmp(_ncu_keep(spec))
            spec["private_tmp"] = True
        except OSError as exc:
            spec["private_tmp"] = f"/tmp shared with the machine: no mount namespace ({exc})"
            print(f"kernelskill: no private /tmp for ncu ({exc})", file=sys.stderr)
    if spec:
        os.environ[SPEC_VAR] = json.dumps(spec, sort_keys=True)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--":
        exec_for_ncu(sys.argv[2:])
    sys.exit("usage: python -m kernelskill.review.confine_ncu -- COMMAND [ARGS...]")
