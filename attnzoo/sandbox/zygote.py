"""Workers forked from a server that has already imported numpy and torch.

A fresh ``python -m attnzoo.sandbox.worker`` spends about two seconds of CPU importing torch before
its first answer, and a check starts several: one, one more for the detector that needs an
implementation with no history, and one after every crash or hang. The server (``python -m
attnzoo.sandbox.zygote FD``) imports them once, runs no torch op (so no thread pool exists to be
forked) and forks one worker per request. It speaks only over the socketpair it was born with: it
has no address, so nothing else can ask it for a process. A request carries the worker's wire
socket and output pipe (SCM_RIGHTS) and its environment and working directory (JSON); the child
(:mod:`attnzoo.sandbox.child`) becomes what ``python -m attnzoo.sandbox.worker FD`` started there
would be — its own session, no terminal, stdin from /dev/null, unbuffered stdout and stderr into
the pipe, that environment and directory first on ``sys.path`` — and SIGKILL comes to it when the
server dies, which dies with attnzoo. The server reaps its children and reports each exit status;
:class:`Forked` is the parent's handle on a worker (``pid``/``poll``/``wait`` as
``subprocess.Popen``). The modules the server imported stay imported in the worker, as
``sys.modules``; the target's own module is imported by the worker, fresh, every time.

``attnzoo grade`` forks its pytest runs here too (:func:`spawn_pytest`): the child is set up the
same way, with its output appended to a file, keeps the socket it was handed (its spec comes
on it: :data:`child.inherited`), confines itself to the grade's isolation (strict: the walls a
worker has; process: the limits, and Landlock's scoping where it can: :func:`confine.scope`)
and becomes ``python -m pytest ARGS`` with torch on one thread; modules
a caller wants ready for its children are named with :func:`preload` before the server starts.
"""

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from attnzoo.sandbox import child, lifeline

PRELOAD = ["numpy", "torch", "detectors.kit.verdict", "attnzoo.sandbox.decide",
           "attnzoo.sandbox.offer", "attnzoo.sandbox.probes", "attnzoo.sandbox.target",
           "attnzoo.sandbox.wire", "attnzoo.sandbox.worker"]
START_SECONDS = 120.0  # from a request to its pid, the server's own imports included
CONFINE_SECONDS = 30.0  # from a fork to the child's word on its confinement
_lock = threading.Lock()
_server = None


class Server:
    """The parent's end: one per attnzoo process, started on the first worker, again if it
    died."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "attnzoo.sandbox.zygote", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        theirs.close()
        ours.send(json.dumps(PRELOAD).encode())  # not in its arguments: its children show them
        self.sock, self.codes, self.forked = ours, {}, []
        self.alive, self.mutex = True, threading.Lock()

    def fork(self, request, fds):
        """The server's word on a new child (its ``pid``, and ``confined`` to the level asked or
        ``unconfined``: why not), or None when the server is gone."""
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
        except OSError:
            self.alive = False
            return None
        until = time.monotonic() + START_SECONDS
        while self.alive and time.monotonic() < until:  # forks are one at a time (the
            with self.mutex:                               # module's lock): one pid is due
                if not self.forked:
                    self._read(0.05)
                if self.forked:
                    return self.forked.pop()
        if self.alive:  # stuck importing: no worker will come from it
            self.alive = False
            self.proc.kill()
        return None

    def status(self, pid, timeout):
        """The exit code of a worker (negative: the signal), None while it runs; waits up to
        ``timeout`` seconds (None: until it ends). A server gone reports its workers gone."""
        until = None if timeout is None else time.monotonic() + timeout
        while pid not in self.codes and self.alive:
            left = 0.05 if until is None else min(0.05, max(0.0, until - time.monotonic()))
            with self.mutex:  # threads may watch workers at once: one reads at a time
                if pid not in self.codes and self._read(left) is None and left == 0:
                    break
        if pid in self.codes:
            return self.codes[pid]
        return -signal.SIGKILL if not self.alive else None  # its SIGKILL came with the server's

    def _read(self, timeout):
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        try:
            data = self.sock.recv(4096)
        except OSError:
            data = b""
        if not data:
            self.alive = False
            return None
        message = json.loads(data)
        if "exit" in message:
            self.codes[message["exit"]] = message["code"]
        if "pid" in message:
            self.forked.append(message)
        return message


class Forked:
    """A worker forked by the server, watched like a ``subprocess.Popen``; ``confined`` is the
    isolation level it confined itself to, ``unconfined`` why it could not."""

    def __init__(self, message, server):
        self.pid, self.server, self.returncode = message["pid"], server, None
        self.confined, self.unconfined = message.get("confined"), message.get("unconfined")
        self.scoped, self.unscoped = message.get("scoped"), message.get("unscoped")

    def poll(self):
        if self.returncode is None:
            self.returncode = self.server.status(self.pid, 0)
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self.returncode = self.server.status(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("attnzoo.sandbox.worker", timeout)
        return self.returncode


def spawn(wire_fd, out_fd, env, confinement=None):
    """Fork a worker that speaks on ``wire_fd`` and writes into ``out_fd``, confined by
    ``confinement`` (:meth:`confine.Isolation.request`) before it runs anything else; its
    ``Forked``."""
    request = {"run": "worker", "env": env, "cwd": os.getcwd()}
    if confinement is not None:
        request["confine"] = confinement
    return _fork(request, [wire_fd, out_fd])


def spawn_pytest(args, cwd, env, output, channel, scope=True, confinement=None):
    """Fork ``python -m pytest ARGS`` in ``cwd``, its output appended to the file ``output``;
    it inherits the socket ``channel`` (a descriptor), on which its spec comes, is confined by
    ``confinement`` (:meth:`confine.Isolation.request`) before the suite's code runs, and is
    scoped (:func:`confine.scope`) when ``scope`` and the kernel allow."""
    out = os.open(output, os.O_WRONLY | os.O_APPEND)
    request = {"run": "pytest", "args": list(args), "env": env, "cwd": str(cwd),
               "scope": bool(scope)}
    if confinement is not None:
        request["confine"] = confinement
    try:
        return _fork(request, [channel, out])
    finally:
        os.close(out)


def preload(*names):
    """Modules the server imports for its children, from its next start."""
    PRELOAD.extend(n for n in names if n not in PRELOAD)


def start():
    """Start the server now, if none runs, so that it imports while this process goes on."""
    global _server
    with _lock:
        if _server is None or not _server.alive:
            _server = Server()


def _fork(request, fds):
    global _server
    with _lock:
        for _ in range(2):  # a server the last target killed is started again, once
            if _server is None or not _server.alive:
                _server = Server()
            message = _server.fork(request, fds)
            if message is not None:
                return Forked(message, _server)
        raise OSError("the worker server did not start")


def stop():
    """Close the server (it exits on end of file) and reap it, so nothing of it outlives
    attnzoo and its time is counted as attnzoo's; registered at exit."""
    global _server
    with _lock:
        if _server is None:
            return
        server, _server = _server, None
    server.sock.close()
    try:
        server.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


atexit.register(stop)


def server_pid():
    """The server's pid (not a stray of any worker), or None."""
    return _server.proc.pid if _server is not None and _server.alive else None


# -- the server ----------------------------------------------------------------------------


def serve(fd):
    lifeline.die_with_parent()
    lifeline.dumpable(False)  # no worker can ptrace the server (its children undo this)
    lifeline.subreaper()  # a child's orphans come here when it ends, and are killed
    sock = socket.socket(fileno=fd)
    forked = set()  # the children it forked (the rest of its children are adopted orphans)
    for name in json.loads(sock.recv(1 << 16) or b"[]"):  # the modules to import first
        __import__(name)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            _report_exits(sock, forked)
        if sock in ready:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 2)
            if not message:
                _kill_adopted(forked)
                return  # attnzoo is gone: so are the workers (their parent-death signal)
            word, said = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(word)
                child.become(json.loads(message), fds, (sock, wake_r, wake_w), said)
            forked.add(pid)
            os.close(said)
            for f in fds:
                os.close(f)
            sock.send(json.dumps({"pid": pid, **_heard(word)}).encode())


def _report_exits(sock, forked):
    """Tell attnzoo of each forked child that ended; kill what the ended ones orphaned (a
    child is a subreaper, so its orphans come here only once it is gone: nothing a target
    double-forks outlives its worker or its pytest run)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in forked:
            forked.discard(pid)
            sock.send(json.dumps({"exit": pid,
                                  "code": os.waitstatus_to_exitcode(status)}).encode())
    _kill_adopted(forked)


def _kill_adopted(forked):
    """SIGKILL every child of the server it did not fork: orphans of ended children. Their
    death wakes the server again, which then kills the orphans they leave in turn."""
    me = os.getpid()
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit() or int(name) in forked:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != b"Z":
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass


def _heard(word):
    """The child's word on its confinement (JSON, then end of file), read before anything of
    the target runs in it; a child that dies or stalls first is unconfined."""
    data = b""
    until = time.monotonic() + CONFINE_SECONDS
    try:
        while (left := until - time.monotonic()) > 0 and select.select([word], [], [], left)[0]:
            chunk = os.read(word, 4096)
            if not chunk:
                return json.loads(data or b"{}")
            data += chunk
        return {"unconfined": f"no word on its confinement within {CONFINE_SECONDS:g} s"}
    except ValueError:
        return {"unconfined": "an unreadable word on its confinement"}
    finally:
        os.close(word)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
