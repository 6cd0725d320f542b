"""The operating system's walls around a worker, raised in the worker before it imports the
target; docs/sandbox.md says exactly what each level holds.

``strict`` (Linux: Landlock ABI 6 or later, unprivileged user namespaces, x86_64 or aarch64):
the worker enters new user, network and mount namespaces (its network is a loopback that is
down; abstract Unix sockets belong to a network namespace), mounts a tmpfs of the scratch size
over its scratch directory (gone with the worker's last process), and restricts itself with
Landlock: files are read and executed everywhere but under /dev, written only under the scratch
and to /dev/null (and the accelerators' device files, which CUDA and ROCm open read-write); no
TCP bind or connect; no signal, abstract socket or ptrace reaching a process outside its own.
A seccomp filter refuses new Unix-domain sockets, since Landlock at ABI 7 does not see a connect
to a named one (a session bus, a container daemon); io_uring, which would reach sockets without
a system call the filter sees; and changing a file's mode, owner, times or extended attributes,
which Landlock does not restrict either. ``process``: only the limits below, and the session
hygiene every worker has (:mod:`attnzoo.sandbox.hygiene`).

:func:`scope` is Landlock's scoping alone (signals, abstract Unix sockets, and the ptrace
restriction every Landlock domain has), for a graded pytest run under ``process``, which may
otherwise do what its user may (under ``strict`` a graded run has a worker's walls).

Both levels cap what the worker allocates (RLIMIT_DATA: private writable memory; not
RLIMIT_AS, which counts the address space CUDA reserves), the size of each file it writes
(RLIMIT_FSIZE; strict also caps the scratch as a whole) and core dumps (none).

Raw system calls through ctypes: the work is three Landlock calls, one unshare, two mounts and
one seccomp filter, and the ``landlock`` package on PyPI is a pre-release that covers Landlock
alone; this module needs nothing but the standard library, so the probe runs in a bare
``python -I -S``.
"""

import collections
import ctypes
import os
import resource
import stat
import struct
import sys

STRICT, PROCESS = "strict", "process"
LEVELS = (STRICT, PROCESS)
STRICT_WORDS = ("writes only to its scratch and /dev/null, no network, no signal or ptrace "
                "outside its own processes, no terminal")
PROCESS_WORDS = "its own processes with your rights (your files and network), no terminal"
LANDLOCK_NEEDED = 6  # the first ABI that scopes signals and abstract Unix sockets

# Landlock (include/uapi/linux/landlock.h); the system calls have one number on every
# architecture since Linux 5.1
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TRUNCATE, IOCTL_DEV = 1 << 14, 1 << 15
FS_BITS = {1: 13, 2: 14, 3: 15, 4: 15, 5: 16, 6: 16, 7: 16}  # access rights each ABI knows
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a file may get
READ = EXECUTE | READ_FILE | READ_DIR
DEVICE = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV | READ_DIR
NET_TCP = 1 | 2  # LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP
SCOPES = 1 | 2  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL
# /dev as the worker sees it: nothing else there opens (no terminal, no /dev/shm)
DEV_READ = ("zero", "full", "random", "urandom")
ACCELERATORS = ("nvidia", "dri", "kfd")  # name prefixes: CUDA's, DRM's, ROCm's

# namespaces and mounts (include/uapi/linux/sched.h, mount.h)
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_PRIVATE, MS_REC = 2, 4, 1 << 18, 1 << 14
PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 4, 22, 2

# seccomp, per machine: AUDIT_ARCH, socket, socketpair, and the calls that change a file's
# mode, owner, times or extended attributes, which Landlock at ABI 7 does not restrict (chmod,
# fchmod, chown, fchown, lchown, utime, setxattr, lsetxattr, fsetxattr, removexattr,
# lremovexattr, fremovexattr, utimes, fchownat, futimesat, fchmodat, utimensat; aarch64 has
# only the newer of them)
ARCHES = {"x86_64": (0xC000003E, 41, 53, (90, 91, 92, 93, 94, 132, 188, 189, 190, 197, 198,
                                          199, 235, 260, 261, 268, 280)),
          "aarch64": (0xC00000B7, 198, 199, (52, 55, 5, 6, 7, 14, 15, 16, 54, 53, 88))}
METADATA = (452, 463, 466)  # fchmodat2, setxattrat, removexattrat: one number everywhere
IO_URING_SETUP, X32_BIT, AF_UNIX, SOCK_DGRAM = 425, 0x40000000, 1, 2
EACCES, EPERM, ENOSYS = 13, 1, 38

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                        ctypes.c_ulong]
_unavailable = ...  # not probed yet


class Isolation(collections.namedtuple("Isolation", "level memory scratch")):
    """What a worker is confined to: the level, and the memory and scratch caps in bytes."""

    def request(self, scratch_dir):
        """The JSON the worker server hands to :func:`apply` in the new worker."""
        return {"level": self.level, "scratch_dir": scratch_dir, "memory": self.memory,
                "scratch": self.scratch}


def apply(level, scratch_dir, memory, scratch):
    """Confine this process (single-threaded, before the target's code runs); OSError says
    which step the kernel refused."""
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (scratch, scratch))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # forked from a server that is not dumpable: as any process is, so that attnzoo can read
    # its /proc entries and write its uid map
    _call(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    if level == STRICT:
        _namespaces(scratch_dir, scratch)
        _call(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _landlock(scratch_dir)
        _seccomp()
    elif level != PROCESS:
        raise OSError(f"no isolation level {level!r}")


def _namespaces(scratch_dir, size):
    uid, gid = os.getuid(), os.getgid()
    _call(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):  # the same ids inside as outside
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    _call(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount(MS_PRIVATE)")
    _call(_libc.mount(b"attnzoo-scratch", os.fsencode(scratch_dir), b"tmpfs",
                      MS_NOSUID | MS_NODEV, f"size={size},mode=0700".encode()),
          "mount(tmpfs)")


def _landlock(scratch_dir):
    abi = landlock_abi()
    if abi < LANDLOCK_NEEDED:
        raise OSError(f"Landlock ABI {abi}: {LANDLOCK_NEEDED} or later is needed")
    handled = (1 << FS_BITS[min(abi, max(FS_BITS))]) - 1
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", handled, NET_TCP, SCOPES))
    ruleset = _call(_libc.syscall(CREATE_RULESET, attr, ctypes.c_size_t(24),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        _rule(ruleset, "/", READ_DIR)  # directories may be listed everywhere
        for name in os.listdir("/"):
            if name != "dev":
                _rule(ruleset, "/" + name, READ)
        _rule(ruleset, "/dev/null", READ_FILE | WRITE_FILE | TRUNCATE)
        for name in DEV_READ:
            _rule(ruleset, "/dev/" + name, READ_FILE)
        for name in os.listdir("/dev"):
            if name.startswith(ACCELERATORS):
                _rule(ruleset, "/dev/" + name, DEVICE)
        _rule(ruleset, scratch_dir, handled)
        _call(_libc.syscall(RESTRICT_SELF, ruleset, ctypes.c_uint32(0)),
              "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _rule(ruleset, path, access):
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # a dangling link, a device this machine lacks
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_RIGHTS
        attr = ctypes.create_string_buffer(struct.pack("=Qi", access, fd))
        _call(_libc.syscall(ADD_RULE, ruleset, 1, attr, ctypes.c_uint32(0)),
              f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _seccomp():
    """Refuse socket(AF_UNIX), socketpair(AF_UNIX, SOCK_DGRAM) (whose sendto may name any
    socket), io_uring_setup and the calls that change a file's metadata; a system call of
    another ABI (32-bit, x32) is refused too, so that no other numbering gets past the
    filter."""
    arch, socket_nr, socketpair_nr, metadata = ARCHES[os.uname().machine]
    program = _assemble([
        ("ld", 4), ("jeq", arch, None, "eperm"),  # seccomp_data.arch
        ("ld", 0), ("jge", X32_BIT, "eperm", None),  # seccomp_data.nr
        ("jeq", IO_URING_SETUP, "enosys", None),
        *(("jeq", nr, "eperm", None) for nr in metadata + METADATA),
        ("jeq", socket_nr, "socket", None),
        ("jeq", socketpair_nr, "socketpair", "allow"),
        "socket", ("ld", 16), ("jeq", AF_UNIX, "eacces", "allow"),  # args[0]: the domain
        "socketpair", ("ld", 16), ("jeq", AF_UNIX, None, "allow"),
        ("ld", 24), ("and", 0xF), ("jeq", SOCK_DGRAM, "eacces", "allow"),  # args[1]: type
        "allow", ("ret", 0x7FFF0000),
        "eacces", ("ret", 0x00050000 | EACCES),
        "eperm", ("ret", 0x00050000 | EPERM),
        "enosys", ("ret", 0x00050000 | ENOSYS),
    ])
    filters = ctypes.create_string_buffer(program)  # struct sock_fprog points at it
    fprog = ctypes.create_string_buffer(
        struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(filters)))
    _call(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0),
          "prctl(PR_SET_SECCOMP)")


def _assemble(lines):
    """Classic BPF from (op, k[, true label, false label]) tuples and label strings; a missing
    label is the next instruction."""
    codes = {"ld": 0x20, "jeq": 0x15, "jge": 0x35, "and": 0x54, "ret": 0x06}
    where, n = {}, 0
    for line in lines:
        if isinstance(line, str):
            where[line] = n
        else:
            n += 1
    out, n = b"", 0
    for line in lines:
        if isinstance(line, str):
            continue
        op, k, *jumps = line
        jt, jf = ((0 if label is None else where[label] - n - 1) for label in jumps or
                  (None, None))
        out += struct.pack("=HBBI", codes[op], jt, jf, k)
        n += 1
    return out


def scope():
    """Landlock's scoping alone (ABI 6 or later), for a process that may otherwise do what its
    user may (a graded pytest run under ``process``): from now on it, and everything it
    starts, can send no signal to, ptrace, or connect to an abstract Unix socket of, a process
    outside its own Landlock domain (attnzoo, the worker server, the implementation's worker,
    another row's run). Files and network are left alone. OSError says why not: an older
    kernel, no Landlock."""
    if sys.platform != "linux":
        raise OSError(f"Landlock needs Linux, not {sys.platform}")
    abi = landlock_abi()
    if abi < LANDLOCK_NEEDED:
        raise OSError(f"this kernel has Landlock ABI {abi}; scoping signals needs "
                      f"{LANDLOCK_NEEDED} or later (Linux 6.12)" if abi else
                      "this kernel has no Landlock (Linux 6.12 or later with it enabled)")
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", 0, 0, SCOPES))
    ruleset = _call(_libc.syscall(CREATE_RULESET, attr, ctypes.c_size_t(24),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        _call(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _call(_libc.syscall(RESTRICT_SELF, ruleset, ctypes.c_uint32(0)),
              "landlock_restrict_self")
    finally:
        os.close(ruleset)


def landlock_abi():
    """The kernel's Landlock ABI version; 0 where it has none (or it is disabled)."""
    if sys.platform != "linux":
        return 0
    abi = _libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(abi), 0)


def unavailable():
    """Why ``strict`` cannot be had here (one phrase), or None: found once per process by
    confining a throwaway process and seeing a write outside its scratch fail."""
    global _unavailable
    if _unavailable is ...:
        _unavailable = _why_not()
    return _unavailable


def _why_not():
    if sys.platform != "linux":
        return f"strict isolation needs Linux, not {sys.platform}"
    if os.uname().machine not in ARCHES:
        return f"strict isolation knows no system call numbers for {os.uname().machine}"
    abi = landlock_abi()
    if abi < LANDLOCK_NEEDED:
        return (f"this kernel has Landlock ABI {abi}, strict isolation needs "
                f"{LANDLOCK_NEEDED} or later (Linux 6.12)" if abi else
                "this kernel has no Landlock (Linux 6.12 or later with it enabled is needed)")
    import subprocess
    import tempfile

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory(prefix="attnzoo-probe-") as base:
        os.mkdir(os.path.join(base, "scratch"))
        code = (f"import sys; sys.path.insert(0, {root!r}); from attnzoo.sandbox import "
                f"confine; confine._probe({base!r})")
        try:
            p = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                               text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"the strict isolation probe did not run ({e})"
    if p.returncode != 0 or p.stdout.strip() != "confined":
        lines = (p.stderr or p.stdout).strip().splitlines()
        return f"this kernel refuses part of it: {lines[-1] if lines else p.returncode}"
    return None


def _probe(base):
    """In a throwaway process: confine it, then show that only the scratch takes writes."""
    apply(STRICT, os.path.join(base, "scratch"), 1 << 30, 1 << 20)
    with open(os.path.join(base, "scratch", "written"), "w") as f:
        f.write("scratch takes writes")
    try:
        open(os.path.join(base, "escaped"), "x").close()
    except PermissionError:
        print("confined")
    else:
        raise SystemExit("a file outside the scratch could be created")


def _call(result, what):
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result
