"""`kernelskill doctor`: what this machine offers the tool, and what to do about each missing piece.

Each check is one `Check`: a name, a state (ok, warn: the tool runs without it, with less; fail: a command will
stop without it; info), what was found, and, unless it is ok, the one thing to do. The sandbox check starts a child
process confined exactly as a review worker is (review/confine.py) and reports what each layer became there, so the
answer is this machine's, not a guess from kernel versions.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

State = Literal["ok", "warn", "fail", "info"]


class Check(BaseModel):
    name: str
    state: State
    found: str
    fix: str | None = None  # what to do, when the state is not ok


def run_checks() -> list[Check]:
    checks = [_python()]
    gpu = _gpu()
    checks += [gpu, _nvcc(gpu.state == "ok"), _ncu(gpu.state == "ok"), _triton(gpu.state == "ok")]
    checks += _sandbox()
    checks += _caches()
    return checks


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.state == "fail" for c in checks) else 0


# ---- the checks -------------------------------------------------------------------------------------------------


def _python() -> Check:
    import torch

    from kernelskill import __version__

    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only build"
    return Check(
        name="python",
        state="info",
        found=f"kernelskill {__version__}, Python {platform.python_version()}, "
        f"torch {torch.__version__} ({build}), {sys.executable}",
    )


def _gpu() -> Check:
    import torch

    smi = shutil.which("nvidia-smi")
    driver = _first_line([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"]) if smi else None
    if torch.cuda.is_available():
        names = ", ".join(sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())}))
        return Check(
            name="gpu",
            state="ok",
            found=f"{torch.cuda.device_count()} GPU(s): {names}" + (f"; driver: {driver}" if driver else ""),
        )
    if driver:
        fix = (
            "a GPU is installed but torch cannot use it: install a CUDA build of torch that this driver supports "
            "(PyTorch's install selector gives the command), then run doctor again"
        )
        return Check(
            name="gpu",
            state="warn",
            found=f"nvidia-smi sees {driver}; torch {torch.__version__} does not "
            "(CPU-only build, or a CUDA version the driver is too old for)",
            fix=fix,
        )
    return Check(
        name="gpu",
        state="warn",
        found="no NVIDIA GPU visible",
        fix="none needed to try the tool: on the CPU, Triton kernels run in Triton's interpreter and CUDA "
        "kernels are compile-checked only; speedups need an NVIDIA GPU with its driver",
    )


def _nvcc(gpu: bool) -> Check:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = shutil.which("nvcc") or (
        str(Path(home) / "bin" / "nvcc") if home and (Path(home) / "bin" / "nvcc").is_file() else None
    )
    ninja = shutil.which("ninja")
    if nvcc:
        version = _first_line([nvcc, "--version"], last=True) or "version unknown"
        extra = "" if ninja else " (ninja missing: torch's own load_inline, the builder's fallback, needs it)"
        return Check(
            name="nvcc",
            state="warn" if not ninja else "ok",
            found=f"{nvcc}: {version}{extra}",
            fix=None if ninja else "pip install ninja",
        )
    return Check(
        name="nvcc",
        state="warn",
        found="not on PATH, CUDA_HOME not set",
        fix="only CUDA C++ candidates need it (--backend cuda): install the CUDA toolkit and put its bin/ "
        "on PATH or set CUDA_HOME" + ("" if gpu else "; on a machine without a GPU they are then " "compile-checked"),
    )


def _ncu(gpu: bool) -> Check:
    ncu = shutil.which("ncu")
    if not ncu:
        return Check(
            name="ncu",
            state="warn",
            found="Nsight Compute (ncu) not on PATH",
            fix="install Nsight Compute (it comes with the CUDA toolkit) and put ncu on PATH; without it "
            "the decision policy works from code features and timings only (--profile off does the same "
            "on purpose)"
            if gpu
            else "needed only on a GPU, for profiles",
        )
    version = _first_line([ncu, "--version"], last=True) or "version unknown"
    if not gpu:
        return Check(name="ncu", state="info", found=f"{ncu}: {version}; no GPU to profile here")
    from kernelskill.review.confine import _profiling_admin_only

    if _profiling_admin_only() and os.geteuid() != 0:
        return Check(
            name="ncu",
            state="warn",
            found=f"{ncu}: {version}; the driver lets only admins read GPU "
            "performance counters (RmProfilingAdminOnly is not 0)",
            fix="run as root, or load the driver with NVreg_RestrictProfilingToAdminUsers=0; until then "
            "profiles fail with ERR_NVGPUCTRPERM and decisions use code features only",
        )
    return Check(name="ncu", state="ok", found=f"{ncu}: {version}; counters readable by this user")


def _triton(gpu: bool) -> Check:
    try:
        import triton
    except ImportError:
        return Check(
            name="triton",
            state="fail",
            found="not installed",
            fix="pip install 'kernelskill[triton]' (Triton is the default backend)",
        )
    if not gpu:
        try:
            import numpy  # noqa: F401  (Triton's interpreter needs it)
        except ImportError:
            return Check(
                name="triton",
                state="fail",
                found=f"triton {triton.__version__}; numpy missing",
                fix="pip install numpy (Triton's CPU interpreter needs it)",
            )
        return Check(name="triton", state="ok", found=f"triton {triton.__version__} (its interpreter, on the CPU)")
    return Check(name="triton", state="ok", found=f"triton {triton.__version__}")


def probe() -> None:
    """In the confined child: confine it as a worker is, try a TCP connect, print the layers' report."""
    import socket

    from kernelskill.review import confine

    try:
        report = confine.apply(strict=False)
    except confine.Unconfined as exc:  # strict=False never raises; kept for an old spec
        report = exc.report
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(0.5)
        try:
            s.connect(("127.0.0.1", 9))
            report["_socket"] = "connected"
        except ConnectionRefusedError:
            report["_socket"] = "open"
        except OSError as exc:
            report["_socket"] = "open" if "refused" in str(exc) else str(exc)
        finally:
            s.close()
    except OSError as exc:
        report["_socket"] = "blocked: " + str(exc)
    print("DOCTOR " + json.dumps(report), flush=True)


def _sandbox() -> list[Check]:
    """Each layer as a worker would get it, from a child confined the same way."""
    from kernelskill.errors import KernelSkillError
    from kernelskill.review import confine
    from kernelskill.settings import Sandbox

    try:
        sandbox = Sandbox.from_env()
    except KernelSkillError as exc:
        return [Check(name="sandbox", state="fail", found=str(exc), fix="fix or unset KERNELSKILL_SANDBOX")]
    from kernelskill.review.sandbox import ZygoteError, run_confined

    base = Path(tempfile.mkdtemp(prefix="kernelskill-doctor-"))
    try:
        env = confine.environment(None, interpret=False, sandbox=sandbox)
        try:
            done = run_confined("kernelskill.doctor", ["--probe"], env, timeout=300)
            code, output = done.code, done.output.decode(errors="replace")
        except (OSError, ZygoteError) as exc:
            return [
                Check(
                    name="sandbox",
                    state="fail",
                    found=f"the probe process did not run: {exc}",
                    fix="run `kernelskill review` on a small candidate to see the worker's own error",
                )
            ]
        line = next((x for x in output.splitlines() if x.startswith("DOCTOR ")), None)
        if line is None:
            tail = " | ".join(output.strip().splitlines()[-3:]) or f"exit status {code}"
            return [
                Check(
                    name="sandbox",
                    state="fail",
                    found=f"a confined process could not start: {tail[:400]}",
                    fix="KERNELSKILL_SANDBOX=off lets reviews run unconfined while you look into it (only "
                    "for code you trust)",
                )
            ]
        report = json.loads(line.removeprefix("DOCTOR "))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    socket_state = report.pop("_socket", None)
    checks = []
    for name in confine.LAYERS:
        entry = report.get(name) or {"state": "off"}
        how = entry.get("mechanism") or entry.get("detail") or ""
        if entry["state"] == "active":
            found = how + (f"; a TCP connect from inside: {socket_state}" if name == "network" and socket_state else "")
            checks.append(Check(name=f"sandbox {name}", state="ok", found=found))
        elif entry["state"] == "off":
            checks.append(
                Check(
                    name=f"sandbox {name}",
                    state="warn",
                    found="off (KERNELSKILL_SANDBOX)",
                    fix="unset KERNELSKILL_SANDBOX to confine candidates again",
                )
            )
        else:
            checks.append(
                Check(
                    name=f"sandbox {name}",
                    state="fail",
                    found=f"unavailable: {how}; reviews stop here until it is "
                    "fixed or turned off explicitly (KERNELSKILL_SANDBOX lists the layers to keep)",
                    fix=confine.FIX[name],
                )
            )
    return checks


def _caches() -> list[Check]:
    from kernelskill.review.caches import runner_caches as cache_folders
    from kernelskill.review.cuda import cache as build_cache

    checks = []
    for var, folder in cache_folders(False).items():
        path = Path(folder)
        probe = path if path.exists() else next((p for p in path.parents if p.exists()), Path("/"))
        writable = os.access(probe, os.W_OK)
        size = _size(path) if path.exists() else 0
        found = f"{path} ({_gib(size)})" if path.exists() else f"{path} (not made yet)"
        if not writable:
            checks.append(
                Check(
                    name=f"cache {var}",
                    state="fail",
                    found=found + ", not writable",
                    fix=f"make it writable, or set {var} to a folder you can write",
                )
            )
            continue
        if var == "KERNELSKILL_CACHE":
            limit = os.environ.get(build_cache.LIMIT_ENV, "20")
            found += f"; kept under {limit} GB ({build_cache.LIMIT_ENV}); `kernelskill cache show` lists it"
        checks.append(Check(name=f"cache {var}", state="ok", found=found))
    return checks


# ---- helpers ----------------------------------------------------------------------------------------------------


def _first_line(cmd: list, last: bool = False) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [x.strip() for x in r.stdout.splitlines() if x.strip()]
    if not lines:
        return None
    return lines[-1] if last else lines[0]


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f} GB" if size >= 2**27 else f"{size / 2**20:.1f} MB"


def render(checks: list[Check], console) -> None:
    """One line per check, what to do indented under it."""
    from rich.markup import escape

    style = {"ok": "green", "warn": "yellow", "fail": "bold red", "info": "dim"}
    width = max(len(c.name) for c in checks)
    for c in checks:
        console.print(f"[{style[c.state]}]{c.state:<4}[/]  {c.name:<{width}}  {escape(c.found)}", highlight=False)
        if c.fix and c.state != "ok":
            console.print(f"      {'':<{width}}  [bold]→[/] {escape(c.fix)}", highlight=False)
    failed = [c.name for c in checks if c.state == "fail"]
    warned = [c.name for c in checks if c.state == "warn"]
    if failed:
        console.print(f"[bold red]{len(failed)} problem(s) to fix:[/] {', '.join(failed)}")
    else:
        console.print("[green]ready[/]" + (f" (with less: {', '.join(warned)})" if warned else ""), highlight=False)


def to_json(checks: list[Check]) -> str:
    return json.dumps({"ok": exit_code(checks) == 0, "checks": [c.model_dump() for c in checks]}, indent=2)


if __name__ == "__main__" and sys.argv[1:] == ["--probe"]:
    probe()
