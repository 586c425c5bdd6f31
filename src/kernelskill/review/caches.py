"""Where a confined process keeps its build and JIT caches, and who may write them.

Every process that runs untrusted code writes only caches that no other source's process reads:

    candidates/<owner>/   a candidate's runners (its prebuild, its review, its profile): `owner` is the digest of
                          its source, so the same source reviewed again finds its builds and kernels, and a
                          different one never sees them (a module planted there is served only to the code that
                          planted it)
    reference/            the reference runner's (the problem's code, compiled and timed for the judge)
    headers/              the precompiled torch headers: built by the harness (`prepare_headers`), never by a
                          runner; a runner may only read them (Landlock), and compiles without one that is missing

Without that split one candidate could plant an object, a precompiled header or a Triton launcher under another's
key and have its own code run, and be timed, under the other's name. The folders live under the sandbox's cache root
(KERNELSKILL_SANDBOX_CACHE, else /var/tmp/kernelskill-sandbox-<uid>); the headers' folder is the harness's own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import stat
import sys
from pathlib import Path

SANDBOX_UID = SANDBOX_GID = 65534
OWNER_VAR = "KERNELSKILL_OWNER"
"""Set in a candidate runner's environment: the owner of its caches (a spare started for that one candidate)."""
HEADERS_VAR = "KERNELSKILL_HEADERS"
"""The precompiled headers a runner reads (never writes); unset in the harness, which builds them."""
CACHE_VARS = ("KERNELSKILL_CACHE", "TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "CUDA_CACHE_PATH",
              "TORCHINDUCTOR_CACHE_DIR")
"""The build and JIT caches a sandboxed process may write."""


def owner_key(source: str) -> str:
    """The cache folder of the runners of a candidate with this source."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def sandbox_cache_root(uid: int = SANDBOX_UID) -> Path:
    """The sandbox's own caches for a worker running as `uid`."""
    chosen = os.environ.get("KERNELSKILL_SANDBOX_CACHE")
    return Path(chosen) / str(uid) if chosen else Path(f"/var/tmp/kernelskill-sandbox-{uid}")


def headers_root() -> Path:
    """The harness's precompiled headers for its runners: a folder of the harness user's, which runners only read."""
    chosen = os.environ.get("KERNELSKILL_SANDBOX_CACHE")
    uid = os.geteuid()
    return Path(chosen) / f"headers-{uid}" if chosen else Path(f"/var/tmp/kernelskill-headers-{uid}")


def ensure_headers_root() -> Path:
    """Make the headers' folder (readable by everyone, writable by the harness user alone) and check that nobody else
    made it first: under a shared /var/tmp another user could, and fill it with headers of their own."""
    root = headers_root()
    root.mkdir(parents=True, exist_ok=True)
    st = root.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(f"{root} is not a folder of this user's (uid {os.geteuid()}): remove it, or set "
                      "KERNELSKILL_SANDBOX_CACHE to a folder of your own")
    root.chmod(0o755)
    return root


def torch_build_folder() -> str:
    """torch's default extensions sub-folder (py311_cu124), read from torch/version.py without importing torch."""
    cuda = None
    try:
        spec = importlib.util.find_spec("torch")
        text = Path(spec.submodule_search_locations[0], "version.py").read_text() if spec else ""
        match = re.search(r"^cuda\b[^=]*=\s*['\"]([\d.]+)['\"]", text, re.MULTILINE)
        cuda = match.group(1) if match else None
    except (OSError, ImportError, ValueError, TypeError, IndexError):
        pass
    py = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}"
    return f"{py}_{'cu' + cuda.replace('.', '') if cuda else 'cpu'}"


def runner_caches(dropped: bool, own: bool = True, reference: bool = False, owner: str | None = None
                  ) -> dict[str, str]:
    """The build and JIT caches of a sandboxed process, named explicitly (HOME points into its scratch folder).
    `owner`: a candidate's runner (its folder, see the module's text); `reference`: the reference runner's; neither:
    the caches every such process shares (the problem's probes, `kernelskill doctor`'s). A process dropped to nobody
    or given an owner or a reference set gets a build cache of its own, and then reads the harness's headers
    (HEADERS_VAR). `own` False (and none of those): the user's caches, for `kernelskill doctor`."""
    from kernelskill.review.cuda import cache as build_cache

    if dropped or own or reference or owner:
        uid, gid = (SANDBOX_UID, SANDBOX_GID) if dropped else (os.geteuid(), os.getegid())
        root = sandbox_cache_root(uid)
        base = root / "reference" if reference else root / "candidates" / owner if owner else root
        own_build = dropped or reference or bool(owner)  # a build cache of the runner's own, not the user's
        caches = {"KERNELSKILL_CACHE": base / "kernelskill" if own_build else build_cache.root(),
                  "TORCH_EXTENSIONS_DIR": base / "torch_extensions" / torch_build_folder(),
                  "TRITON_CACHE_DIR": base / "triton", "CUDA_CACHE_PATH": base / "nv",
                  "TORCHINDUCTOR_CACHE_DIR": base / "inductor"}
        for folder in (root, *([root / "candidates"] if owner else []), base):
            owned_folder(folder, uid, gid)
        for name, path in caches.items():
            if name != "KERNELSKILL_CACHE" or own_build:
                owned_folder(Path(path), uid, gid)
        env = {k: str(v) for k, v in caches.items()}
        if owner:
            env[OWNER_VAR] = owner
            os.utime(base)  # last used now: `kernelskill cache prune` removes the least recently used first
        if own_build:
            env[HEADERS_VAR] = str(ensure_headers_root())
        return env
    import getpass
    import tempfile

    home, env = Path.home(), os.environ
    cache_home = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    return {
        "KERNELSKILL_CACHE": str(build_cache.root()),
        "TORCH_EXTENSIONS_DIR": env.get("TORCH_EXTENSIONS_DIR") or str(cache_home / "torch_extensions" /
                                                                         torch_build_folder()),
        "TRITON_CACHE_DIR": env.get("TRITON_CACHE_DIR") or str(Path(env.get("TRITON_HOME") or home) / ".triton" /
                                                               "cache"),
        "CUDA_CACHE_PATH": env.get("CUDA_CACHE_PATH") or str(home / ".nv" / "ComputeCache"),
        "TORCHINDUCTOR_CACHE_DIR": env.get("TORCHINDUCTOR_CACHE_DIR") or str(
            Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"),
    }


def owned_folder(path: Path, uid: int, gid: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if path.stat().st_uid != uid:
        os.chown(path, uid, gid)
    path.chmod(0o700)
