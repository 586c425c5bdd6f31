"""The Linux mechanisms the sandbox (`confine`) is built from: a network namespace, dropping root, Landlock and a
seccomp filter on `socket()`. Each is a small function that does one thing or raises `Unavailable` with a one-line
reason; `confine` decides which to use and reports what happened.

Written against the kernel's interfaces with ctypes rather than through a library: the Landlock package on PyPI is a
pre-release without network rules or scopes, and pyseccomp needs libseccomp.so, which a GPU machine may lack; the
seccomp filter here is ten BPF instructions. Everything must run in a single-threaded process (the worker's first
lines, before torch is imported): user namespaces and a filter without TSYNC need that.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import platform
import socket
import struct


class Unavailable(Exception):
    """A mechanism this machine does not offer (or forbids), with the reason in one line."""


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long

# per architecture: seccomp(2) and socket(2) numbers and the AUDIT_ARCH value seccomp reports
_ARCH = {
    "x86_64": {"seccomp": 317, "socket": 41, "connect": 42, "sendto": 44, "sched_setaffinity": 203,
               "audit": 0xC000003E, "x32": True},
    "aarch64": {"seccomp": 277, "socket": 198, "connect": 203, "sendto": 206, "sched_setaffinity": 122,
                "audit": 0xC00000B7, "x32": False},
}
_IO_URING_SETUP = 425  # the same on both: io_uring can open sockets without socket(2)
_LANDLOCK_CREATE, _LANDLOCK_ADD, _LANDLOCK_RESTRICT = 444, 445, 446  # the same on every architecture
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID = 0x10000000, 0x40000000, 0x00020000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x1000, 0x4000, 1 << 18


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def _arch() -> dict:
    machine = platform.machine()
    if machine not in _ARCH:
        raise Unavailable(f"no seccomp filter for this architecture ({machine})")
    return _ARCH[machine]


def no_new_privs() -> None:
    """Neither setuid binaries nor file capabilities can raise this process's privileges again (Landlock and
    seccomp both need it when the process lacks CAP_SYS_ADMIN)."""
    _check(_LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


# ------------------------------------------------------------------------------------------------ network namespace
def _unshare(flags: int) -> None:
    _check(_LIBC.unshare(ctypes.c_int(flags)), "unshare")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def network_namespace(loopback: bool = False, user_namespace: bool = True) -> str:
    """Move this process into a new, empty network namespace (only a loopback device, down unless `loopback`).
    As root that needs CAP_SYS_ADMIN; otherwise (with `user_namespace`) an unprivileged user namespace, the uid
    mapped to itself."""
    reasons = []
    if os.geteuid() == 0:
        try:
            _unshare(CLONE_NEWNET)
            how = "network namespace"
        except OSError as exc:
            reasons.append(str(exc))
            how = ""
    else:
        how = ""
    if not how and not user_namespace:
        raise Unavailable("; ".join(reasons))
    if not how:
        uid, gid = os.geteuid(), os.getegid()
        try:
            _unshare(CLONE_NEWUSER | CLONE_NEWNET)
        except OSError as exc:
            reasons.append(f"{exc} (user namespace)")
            raise Unavailable("; ".join(reasons)) from None
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        how = "network namespace (in a user namespace)"
    if loopback:
        loopback_up()
    return how


def loopback_up() -> None:
    """Bring `lo` up, so processes that share the namespace (ncu and the program it profiles) can reach each other."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, siocgifflags, request))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


# ---------------------------------------------------------------------------------------------------- PID namespace
def process_namespace() -> str:
    """Unshare a PID and a mount namespace: the next child this process forks is pid 1 of a PID namespace of its
    own, and when it dies the kernel kills every process left in it. As root that needs CAP_SYS_ADMIN; otherwise it
    is done in an unprivileged user namespace, the uid and gid mapped to themselves (the process stays who it was
    to everything outside). Raises Unavailable."""
    if os.geteuid() == 0:
        try:
            _unshare(CLONE_NEWPID | CLONE_NEWNS)
            return "PID namespace"
        except OSError as exc:
            first = str(exc)
    else:
        first = "not root"
    uid, gid = os.geteuid(), os.getegid()
    try:
        _unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        raise Unavailable(f"{first}; {exc} (user namespace)") from None
    return "PID namespace (in a user namespace)"


SHM_BYTES = 1 << 30  # a runner's own /dev/shm: room for what a library keeps there, not for a second memory


def private_mounts() -> None:
    """In the first process of a new PID namespace: keep mounts from leaking out, then mount a /proc that lists only
    the processes of this namespace (no other process's command line or environment can be read) and an empty
    /dev/shm of its own (another runner's files there are out of sight, and what this one leaves goes with it: the
    tmpfs is gone once the namespace's last process is). /proc/driver is bound back in as it was: in a container,
    the GPU's runtime mounts its own view of /proc/driver/nvidia there, which the CUDA driver reads at start-up."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    driver = os.open("/proc/driver", os.O_PATH | os.O_CLOEXEC) if os.path.isdir("/proc/driver") else None
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        if driver is not None:
            _mount(f"/proc/self/fd/{driver}", "/proc/driver", None, MS_BIND | MS_REC)
    finally:
        if driver is not None:
            os.close(driver)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={SHM_BYTES}")


# ----------------------------------------------------------------------------------------------------- private /tmp
def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda x: x.encode() if x is not None else None)
    _check(_LIBC.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount({target})")


def private_tmp(keep: list[str]) -> list[str]:
    """Move this process into a mount namespace of its own whose /tmp is an empty tmpfs, with the paths of `keep`
    that lie under /tmp bound back in at the same place (as root: it needs CAP_SYS_ADMIN). Returns the paths bound.
    Other processes' files in /tmp are then out of sight, whatever rights /tmp is given later."""
    under = sorted({os.path.realpath(p) for p in keep if p and os.path.realpath(p).startswith("/tmp/")
                    and os.path.exists(p)})
    under = [p for p in under if not any(p.startswith(q + "/") for q in under)]  # a folder's binding covers its files
    links = _links_under_tmp(keep)  # a cache reached through a link (/tmp/run/cache -> /tmp/elsewhere) is made again
    _unshare(CLONE_NEWNS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here reaches the parent namespace
    # opened in the new namespace (a bind source must be one of its mounts), before /tmp is covered
    fds = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in under]
    try:
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        try:
            for path, fd in fds:
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    os.makedirs(path, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    open(path, "a").close()
                _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            for link, target in links:
                if not os.path.lexists(link):
                    os.makedirs(os.path.dirname(link), exist_ok=True)
                    os.symlink(target, link)
        except OSError:
            _LIBC.umount2(b"/tmp", ctypes.c_int(2))  # MNT_DETACH: back to the machine's /tmp, not half a private one
            raise
    finally:
        for _, fd in fds:
            os.close(fd)
    return under


def _links_under_tmp(paths: list[str]) -> list[tuple[str, str]]:
    """The symbolic links under /tmp on the way to each of `paths`, as (link, what it says), parents first: the
    private /tmp binds the paths' real folders back, and the links lead there again."""
    found: dict[str, str] = {}
    for p in paths:
        parts = os.path.abspath(p).split("/") if p else []
        for i in range(3, len(parts) + 1):  # /tmp/a, /tmp/a/b, ...
            q = "/".join(parts[:i])
            if q.startswith("/tmp/") and os.path.islink(q):
                found.setdefault(q, os.readlink(q))
    return sorted(found.items())


# -------------------------------------------------------------------------------------------------------- drop root
def drop_root(uid: int, gid: int) -> None:
    """Become `uid`:`gid` for good. The kernel clears a process's parent-death signal when its uid changes, so the
    one it had is armed again here: without it, a runner whose reviewer (or zygote) died lived on, asleep under
    init (seen after CI's dropped-uid tests)."""
    armed = ctypes.c_int(0)
    _LIBC.prctl(2, ctypes.byref(armed), 0, 0, 0)  # PR_GET_PDEATHSIG
    parent = os.getppid()
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() != uid or os.getuid() != uid:
        raise OSError(errno.EPERM, "the uid did not change")
    if armed.value:
        _LIBC.prctl(1, armed.value, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died while the signal was cleared
            os._exit(1)


CAP_SYS_ADMIN = 21


def drop_capabilities(keep: tuple[int, ...] = ()) -> None:
    """A process that stays root loses every capability but `keep`, for good (bounding set, ambient, permitted):
    it can no longer load modules, trace other processes, bypass file permissions of other users or mount."""
    for cap in range(64):
        if cap in keep:
            continue
        if _LIBC.prctl(24, cap, 0, 0, 0) < 0:  # PR_CAPBSET_DROP; EINVAL past the last capability
            if ctypes.get_errno() == errno.EINVAL:
                break
            _check(-1, "prctl(PR_CAPBSET_DROP)")
    _LIBC.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL (absent before Linux 4.3: ignored)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    kept = sum(1 << cap for cap in keep if cap < 32)
    data = (ctypes.c_uint32 * 6)(kept, kept, 0, 0, 0, 0)  # effective, permitted, inheritable (low, then high 32)
    _check(_LIBC.syscall(ctypes.c_long(_ARCH_CAPSET[platform.machine()]), header, data), "capset")


_ARCH_CAPSET = {"x86_64": 126, "aarch64": 91}


def not_dumpable() -> None:
    """This process's memory and /proc files (its environment, with the caller's API keys) become unreadable to
    processes without CAP_SYS_PTRACE, even those of the same user."""
    _check(_LIBC.prctl(4, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


# --------------------------------------------------------------------------------------------------------- Landlock
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_MAKE_ALL = sum(1 << i for i in range(4, 13))  # remove and make directories, files, devices, sockets, links
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV  # all a non-directory can get


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers (1 = Linux 5.13, 4 = TCP rules, 6 = scopes); raises Unavailable."""
    version = _LIBC.syscall(ctypes.c_long(_LANDLOCK_CREATE), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if version < 0:
        code = ctypes.get_errno()
        why = {errno.ENOSYS: "the kernel has no Landlock (or a seccomp policy hides it)",
               errno.EOPNOTSUPP: "Landlock is built in but not enabled at boot (lsm=...landlock)"}
        raise Unavailable(why.get(code, f"landlock_create_ruleset: {os.strerror(code)}"))
    return int(version)


class Landlock:
    """A ruleset: everything in `handled` is denied except what the rules allow. Files opened before `restrict()`
    keep working (the review's log, the pipes)."""

    def __init__(self, abi: int, fs: bool = True, net: bool = False, scopes: int = 0) -> None:
        self.abi = abi
        rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_MAKE_ALL
        rights |= (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) | (FS_IOCTL_DEV if abi >= 5 else 0)
        self.fs = fs = rights if fs else 0
        attr = _RulesetAttr(fs, (NET_BIND_TCP | NET_CONNECT_TCP) if net and abi >= 4 else 0,
                            scopes if abi >= 6 else 0)
        size = 8 if abi < 4 else 16 if abi < 6 else 24
        self.fd = _check(_LIBC.syscall(ctypes.c_long(_LANDLOCK_CREATE), ctypes.byref(attr), ctypes.c_size_t(size),
                                       ctypes.c_uint32(0)), "landlock_create_ruleset")

    def allow(self, path: str, rights: int) -> bool:
        """Allow `rights` beneath `path` (a folder) or on it (a file); False when the path does not exist."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
            rights &= self.fs if is_dir else (self.fs & FILE_RIGHTS)
            if not rights:
                return False
            rule = _PathBeneath(rights, fd)
            _check(_LIBC.syscall(ctypes.c_long(_LANDLOCK_ADD), ctypes.c_int(self.fd), ctypes.c_int(1),
                                 ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({path})")
        finally:
            os.close(fd)
        return True

    def allow_port(self, port: int, rights: int = NET_BIND_TCP | NET_CONNECT_TCP) -> None:
        rule = _NetPort(rights, port)
        _check(_LIBC.syscall(ctypes.c_long(_LANDLOCK_ADD), ctypes.c_int(self.fd), ctypes.c_int(2), ctypes.byref(rule),
                             ctypes.c_uint32(0)), f"landlock_add_rule(port {port})")

    def restrict(self) -> None:
        try:
            no_new_privs()
            _check(_LIBC.syscall(ctypes.c_long(_LANDLOCK_RESTRICT), ctypes.c_int(self.fd), ctypes.c_uint32(0)),
                   "landlock_restrict_self")
        finally:
            os.close(self.fd)


# ---------------------------------------------------------------------------------------------------------- seccomp
class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


_LD_W_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000


def socket_filter_program(arch: dict, connect: bool = True) -> list[tuple[int, int, int, int]]:
    """BPF: socket() only for AF_UNIX, no io_uring, no foreign-ABI (i386, x32) system calls; all else allowed
    (socketpair() among them: a connected pair reaches nothing outside). `connect` False: no connect() either, and
    no sendto() to an address, both failing with ECONNREFUSED: no server on this machine can be reached, a UNIX
    socket's (tmux, ssh-agent, docker) included; and no sched_setaffinity() (EACCES): a review worker stays on the
    CPUs it was given. On the H100 host a loop of launches ran 1.4x faster on two of its sixteen CPUs than on the
    rest (docs/h200/timing, session 24): a candidate that moved itself there would take a host-bound speedup it did
    not earn. socket(AF_UNIX) itself stays: the CUDA driver makes one at cuInit and fails with 304 without it (seen
    on the H200), and tolerates a refused connection.
    seccomp_data: nr at offset 0, arch at 4, args[i] at 16 + 8 i (low 32 bits first, little-endian)."""
    deny = (_RET, 0, 0, _RET_ERRNO | errno.EACCES)
    refused = (_RET, 0, 0, _RET_ERRNO | errno.ECONNREFUSED)
    allow = (_RET, 0, 0, _RET_ALLOW)
    prog = [(_LD_W_ABS, 0, 0, 4), (_JEQ, 1, 0, arch["audit"]), deny, (_LD_W_ABS, 0, 0, 0)]
    if arch["x32"]:
        prog.append((_JGE, 0, 1, 0x40000000))
        prog.append(deny)
    if not connect:
        return prog + [
            (_JEQ, 11, 0, arch["sched_setaffinity"]),  # -> deny
            (_JEQ, 10, 0, _IO_URING_SETUP),  # -> deny
            (_JEQ, 10, 0, arch["connect"]),  # -> refused
            (_JEQ, 3, 0, arch["sendto"]),  # -> its address
            (_JEQ, 0, 6, arch["socket"]),  # not socket() -> allow
            (_LD_W_ABS, 0, 0, 16),
            (_JEQ, 4, 5, socket.AF_UNIX),  # AF_UNIX -> allow, else deny
            (_LD_W_ABS, 0, 0, 48),  # sendto's dest_addr, low word
            (_JEQ, 0, 4, 0),  # set -> refused
            (_LD_W_ABS, 0, 0, 52),  # high word
            (_JEQ, 0, 2, 0),  # set -> refused
            allow,
            deny,
            refused,
        ]
    prog += [
        (_JEQ, 4, 0, _IO_URING_SETUP),  # -> deny
        (_JEQ, 0, 2, arch["socket"]),  # not socket() -> allow
        (_LD_W_ABS, 0, 0, 16),
        (_JEQ, 0, 1, socket.AF_UNIX),  # AF_UNIX -> allow, else deny
        allow,
        deny,
    ]
    return prog


def block_sockets(connect: bool = True) -> str:
    """Install the filter on every thread of this process (TSYNC); a socket() of any family but AF_UNIX then fails
    with EACCES (`connect` False: and connect() and addressed sendto() with ECONNREFUSED, sched_setaffinity() with
    EACCES). Raises Unavailable where seccomp filters are not permitted."""
    arch = _arch()
    prog = socket_filter_program(arch, connect)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    try:
        no_new_privs()
        _check(_LIBC.syscall(ctypes.c_long(arch["seccomp"]), ctypes.c_uint(1), ctypes.c_uint(1), ctypes.byref(fprog)),
               "seccomp(SECCOMP_SET_MODE_FILTER)")
    except OSError as exc:
        raise Unavailable(str(exc)) from None
    return ("seccomp filter on socket()" if connect else
            "seccomp filter on socket(), connect(), sendto() and sched_setaffinity()")
