"""Worker processes that leave nothing behind: own session, no terminal, capped output.

The worker starts in a new session (so it has no controlling terminal and is the leader of its
own process group), with stdin from /dev/null and stdout/stderr into a pipe that the parent
drains into :class:`Capture` (head and tail kept, the rest counted). Given an isolation
(:mod:`attnzoo.sandbox.confine`), it gets a scratch directory of its own as TMPDIR and HOME and
confines itself before it runs anything else; a worker that could not is killed and the run
stops. :func:`kill` ends the worker's group, everything in its session, and (with
:func:`install` called, as ``attnzoo check`` does) every orphan of it that was re-parented to
attnzoo, then removes its scratch. :func:`install` also makes SIGTERM, SIGHUP and SIGINT end
the run at once (exit 128 + the signal), and they and interpreter exit kill every live worker
first; and it makes attnzoo undumpable, so that no worker of its user can ptrace it. A graded
pytest run, forked elsewhere, is counted among the live workers (:func:`watch`) and ends the
same way.

Before the first worker that can write files starts (any but a strict one), the parent imports
every module it may need while the detectors run (:data:`PARENT_PACKAGES`,
:data:`PARENT_MODULES`): a target that rewrote one of their files would otherwise run its code
in the parent. A strict worker can change no file, so a strict run skips these imports (a
NumPy-only check never imports torch in the parent).
"""

import atexit
import contextlib
import importlib
import os
import pkgutil
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from attnzoo.sandbox import confine, lifeline, zygote

HEAD = TAIL = 64 * 1024  # bytes of the implementation's output kept at each end
# what the parent may import on the way to a verdict (the oracles of each backend, the
# detectors and their kit, the runner, the report's helpers): every module of these packages,
# and these modules
PARENT_PACKAGES = ("detectors", "reference", "attnzoo.diagnosis")
PARENT_MODULES = ("numpy", "numpy.random", "torch", "attnzoo.runner", "attnzoo.report",
                  "attnzoo.shrink", "attnzoo.expectations", "attnzoo.checking")
# where a program looks for a home, a cache or a bus other than HOME: left out, so that it
# falls back on HOME, the scratch
ENV_DROPPED = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
               "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")

_live = {}  # pid -> Popen of workers not yet killed
_installed = False
_imported = False


class Capture:
    """The first HEAD and last TAIL bytes of the worker's output, and how many bytes in all.

    Drained by the parent between and during calls (:meth:`drain`), never by a thread, so what
    a call printed is all here once its reply has arrived (the worker writes unbuffered).
    """

    def __init__(self, stream):
        self.fd = stream.fileno()
        self.stream = stream  # keeps the pipe open
        os.set_blocking(self.fd, False)
        self.head, self.tail, self.total = bytearray(), bytearray(), 0
        self.noted_drop = False

    def drain(self):
        """Read whatever the pipe holds now; False once the writer has closed it."""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                return False
            self.total += len(chunk)
            room = HEAD - len(self.head)
            self.head += chunk[:max(room, 0)]
            if room < len(chunk):
                self.tail = (self.tail + chunk[max(room, 0):])[-TAIL:]

    def dropped(self):
        return self.total - len(self.head) - len(self.tail)

    def first_line(self):
        lines = bytes(self.head[:200]).decode("utf-8", "replace").strip().splitlines()
        return lines[0] if lines else ""


def spawn(wire_fd, env, isolation=None):
    """Start a worker in its own session, speaking on ``wire_fd``, forked from the server that
    has torch imported (:mod:`attnzoo.sandbox.zygote`) and confined to ``isolation`` (a
    :class:`confine.Isolation`, or None: not confined); returns (its process, Capture of its
    output)."""
    prepare(isolation)
    scratch = confinement = None
    if isolation is not None:
        scratch, env = scratch_env(env)
        confinement = isolation.request(scratch)
    read, write = os.pipe()
    try:
        proc = zygote.spawn(wire_fd, write, env, confinement)
    except BaseException:
        os.close(read)
        remove(scratch)
        raise
    finally:
        os.close(write)
    proc.scratch = scratch
    _live[proc.pid] = proc
    capture = Capture(open(read, "rb", buffering=0))
    if isolation is not None and proc.confined != isolation.level:
        kill(proc)
        capture.stream.close()
        raise OSError(f"the worker could not be confined ({isolation.level} isolation): "
                      f"{proc.unconfined or 'it died first'}")
    return proc, capture


def scratch_env(env):
    """(a new scratch directory, ``env`` with it as TMPDIR and HOME): where a confined process
    writes (strict mounts a capped tmpfs over it); :func:`kill` removes it."""
    scratch = tempfile.mkdtemp(prefix="attnzoo-scratch-")
    env = {k: v for k, v in env.items() if k not in ENV_DROPPED}
    env.update(TMPDIR=scratch, TMP=scratch, TEMP=scratch, HOME=scratch)
    return scratch, env


def watch(proc, scratch=None):
    """Count a process forked elsewhere (a graded pytest run) among the live ones: every exit
    path kills it and its descendants (:func:`kill_all`), and it is no other's stray."""
    proc.scratch = scratch
    _live[proc.pid] = proc


def prepare(isolation=None):
    """Before a worker starts: start the worker server (it imports meanwhile) and, unless the
    worker is strict (then it can change no file), import every module this process may need
    later, once."""
    global _imported
    zygote.start()
    if _imported or (isolation is not None and isolation.level == confine.STRICT):
        return
    _imported = True
    names = list(PARENT_MODULES)
    for package in PARENT_PACKAGES:
        found = importlib.import_module(package)
        names += [m.name for m in pkgutil.walk_packages(found.__path__, package + ".")]
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # torch is optional: no torch target can run without it either
            pass


def wait_readable(sock, capture, seconds):
    """Drain the output until ``sock`` has data (True) or ``seconds`` pass (False)."""
    until = time.monotonic() + seconds
    open_ = True
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([sock] + ([capture.fd] if open_ else []), [], [], left)
        if capture.fd in ready:
            open_ = capture.drain()
        if sock in ready:
            return True


def kill(proc):
    """Kill the worker, its process group, its session, its descendants and its orphans.

    Repeated until a scan finds none left (an intermediate process may still be handing an
    orphan over to us while we look), then the worker is reaped.
    """
    pid = proc.pid
    for _ in range(20):
        _signal_group(pid)
        strays = _strays(pid)
        for other in strays:
            _signal(other)
        if not strays:
            break
        time.sleep(0.01)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # uninterruptible sleep: nothing more can be done
        pass
    _live.pop(pid, None)
    _reap_orphans()
    remove(getattr(proc, "scratch", None))


def remove(scratch):
    """The worker's scratch, once nothing of it runs (strict: the mount point, left empty)."""
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


def _signal_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _strays(worker):
    """Live processes of the worker's group or session, its descendants, and (subreaper)
    descendants of attnzoo that are not other workers."""
    me = os.getpid()
    table = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if name.isdigit() and int(name) != me:
            stat = _stat(name)
            if stat is not None and stat[3] != "Z":
                table[int(name)] = stat
    roots = {worker} | ({me} if _installed else set())
    others = (set(_live) - {worker}) | {zygote.server_pid()}  # the server is no one's stray

    def descends(pid):
        seen = set()
        while pid in table and pid not in seen:
            seen.add(pid)
            if pid in others:
                return False
            parent = table[pid][0]
            if parent in roots:
                return parent == worker or pid not in others
            pid = parent
        return False

    return [pid for pid, (ppid, pgrp, session, _) in table.items()
            if pid != worker and pid not in others
            and (pgrp == worker or session == worker or descends(pid))] + \
        ([worker] if worker in table else [])


def _stat(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        # ppid, pgrp, session, state
        return int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode()
    except (OSError, IndexError, ValueError):
        return None


def _reap_orphans():
    """Collect the exit status of orphans re-parented to us, so none stays a zombie."""
    if not _installed:
        return
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _live.pop(pid, None)


def kill_all():
    for proc in list(_live.values()):
        kill(proc)


ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)  # each ends a run the same way, at once


def install():
    """For a command-line run: orphans come to us, and every exit path kills every worker."""
    global _installed
    for sig in ENDING:
        if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup, a background job: left so
            signal.signal(sig, _on_signal)
    if _installed:
        return
    _installed = True
    lifeline.subreaper()  # processes the target orphans are re-parented to attnzoo
    lifeline.dumpable(False)  # no worker ptraces attnzoo (strict's Landlock forbids it anyway)
    atexit.register(kill_all)


@contextlib.contextmanager
def handlers_kept():
    """The caller's handlers of :data:`ENDING` as they were, once a command run in its process
    (``attnzoo.cli.main`` called from Python, as tests do) returns."""
    saved = {sig: signal.getsignal(sig) for sig in ENDING}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:  # None: set outside Python, nothing to put back
                signal.signal(sig, handler)


def _on_signal(signum, frame):
    kill_all()
    try:
        sys.stderr.write(f"attnzoo: stopped by {signal.Signals(signum).name}\n")
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)

