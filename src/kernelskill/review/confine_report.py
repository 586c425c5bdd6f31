"""What the sandbox says about itself: each layer's state, the one-line description in every log, and the refusal
(`Unconfined`) when a layer the settings ask for cannot be put in place, with its fix and the explicit opt-out."""

from __future__ import annotations

LAYERS = ("network", "filesystem", "environment", "user", "processes")


def layer(state: str, how: str | None = None) -> dict:
    return {"state": state, "mechanism" if state == "active" else "detail": how} if how else {"state": state}


class Unconfined(Exception):
    """A layer the settings ask for could not be put in place; the message says why, what to do, and how to go on
    without it. `report` has every layer's state."""

    def __init__(self, message: str, report: dict[str, dict]) -> None:
        super().__init__(message)
        self.report = report


FIX = {
    "network": "a network namespace needs root or unprivileged user namespaces (sysctl "
               "kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0) and the UNIX-socket filter needs "
               "seccomp; in a container, a profile that allows unshare and seccomp (e.g. Docker's default)",
    "filesystem": "Landlock: Linux 5.13 or newer with landlock in the kernel's lsm= list (/sys/kernel/security/lsm)",
    "user": "as root, keep the Python installation (a virtual environment links back to it) and the packages outside "
            "folders only root can enter, such as /root (e.g. under /opt or /usr/local), or run as an ordinary user, "
            "with the filesystem and processes layers available",
    "environment": "set by the harness itself; nothing to install",
    "processes": "a PID namespace needs root or unprivileged user namespaces (sysctl "
                 "kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0); in a container, run it with "
                 "--cap-add SYS_ADMIN or a seccomp profile that allows unshare",
}


def refuse_unavailable(report: dict[str, dict]) -> None:
    """Raise Unconfined when a layer asked for is unavailable: its reason, the fix, and the opt-out."""
    missing = [name for name in LAYERS if report.get(name, {}).get("state") == "unavailable"]
    if not missing:
        return
    keep = [name for name in LAYERS if name not in missing and report.get(name, {}).get("state") != "off"]
    lines = [f"the sandbox cannot confine candidates here: layer {', '.join(missing)} unavailable"]
    for name in missing:
        lines.append(f"- {name}: {report[name].get('detail', '')}\n  fix: {FIX[name]}")
    lines.append(f"to review without {'it' if len(missing) == 1 else 'them'} (only code you trust), set "
                 f"KERNELSKILL_SANDBOX={','.join(keep) or 'off'}; `kernelskill doctor` checks each layer")
    raise Unconfined("\n".join(lines), report)


def describe(report: dict[str, dict]) -> str:
    """One line: `network: active (network namespace); filesystem: ...`."""
    parts = []
    for name in LAYERS:
        entry = report.get(name)
        if entry:
            extra = entry.get("mechanism") or entry.get("detail")
            parts.append(f"{name}: {entry['state']}" + (f" ({extra})" if extra else ""))
    return "; ".join(parts) if parts else "not applied (the process was not started by the harness)"
