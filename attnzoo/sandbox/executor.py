"""Where calls run: in this process (trusted zoo code) or in a worker process (anyone's code).

Both give every call a time limit and turn every way a call can go wrong into an
:class:`ImplementationFailure`, so a detector sees answers or failures and nothing else.
The worker keeps the implementation away from the harness: a hang is killed, a crash or
``sys.exit`` takes only the worker down, and what it prints never reaches the report.
"""

import inspect
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection

from attnzoo.sandbox import probes
from attnzoo.sandbox.target import BadTarget, load, manifest
from detectors.kit.verdict import CRASHED, HUNG, ImplementationFailure

CALL_SECONDS = 10.0  # per-call time limit
LOAD_SECONDS = 30.0  # importing the target, torch included
GRADCHECK_FACTOR = 6  # gradcheck makes many calls


def limit_for(request, seconds):
    return seconds * GRADCHECK_FACTOR if request.gradcheck else seconds


class InProcess:
    """Calls the implementation directly, with SIGALRM as the time limit where it can be set."""

    def __init__(self, target, obj=None, call_seconds=CALL_SECONDS):
        self.target = target
        self.obj = load(target.locator) if obj is None else obj
        self.manifest = manifest(self.obj, target)
        self.call_seconds = call_seconds
        self.notes = []

    def fresh(self):
        """An executor on a new instance of the implementation, with none of its history."""
        obj = self.obj
        if not inspect.ismodule(obj):
            try:
                obj = type(obj)()
            except TypeError:  # an object that cannot be rebuilt from nothing: keep it
                pass
        return InProcess(self.target, obj, self.call_seconds)

    def run(self, request):
        limit = limit_for(request, self.call_seconds)
        if threading.current_thread() is not threading.main_thread():
            return probes.execute(self.obj, self.target, self.manifest, request)
        previous = signal.signal(signal.SIGALRM, _raise_timeout)
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            return probes.execute(self.obj, self.target, self.manifest, request)
        except probes.CallTimeout:
            raise ImplementationFailure(
                HUNG, f"no answer within {limit:g} s", request.describe()
            ) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    @staticmethod
    def trusted(target):
        """Where this repository's own code (the reference) runs: here, directly."""
        return InProcess(target)

    def close(self):
        pass


def _raise_timeout(signum, frame):
    raise probes.CallTimeout()


class Isolated:
    """Runs the implementation in a worker process, restarted after a hang or a crash."""

    def __init__(self, target=None, call_seconds=CALL_SECONDS, load_seconds=LOAD_SECONDS):
        self.target = target
        self.call_seconds = call_seconds
        self.load_seconds = load_seconds
        self.notes = []
        self.proc = self.conn = self.output = None
        self.manifest = None
        self._spawn()
        if target is not None:
            self.use(target)

    def _spawn(self):
        parent, child = socket.socketpair()
        self.output = tempfile.TemporaryFile()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "attnzoo.sandbox.worker", str(child.fileno())],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=self.output,
            stderr=self.output,
            env=env,
        )
        child.close()
        self.conn = Connection(parent.detach())

    def _ask(self, message, what):
        """Send a loading message; any failure to answer is the target's fault: BadTarget."""
        try:
            self.conn.send(message)
            reply = self._receive(self.load_seconds, what)
        except ImplementationFailure as e:
            raise BadTarget(f"{what}: {e.what}: fix the module") from None
        if reply[0] == "bad":
            raise BadTarget(reply[1])
        return reply[1]

    def describe(self, locator):
        return self._ask(("describe", locator), f"{locator} while importing it")

    def infer_backend(self, locator):
        """Which array library a lesson module speaks, by one probe call under the time limit.

        The probe runs the target's own code, so it is a call like any other: if it hangs or
        takes the worker down, the worker is restarted and the answer is "don't know".
        """
        try:
            self.conn.send(("infer", locator))
            reply = self._receive(self.call_seconds, f"{locator}: causal_mask(2)")
        except (ImplementationFailure, OSError):
            self.close()
            self._spawn()
            return None
        return reply[1] if reply[0] == "inferred" else None

    def use(self, target):
        self.target = target
        self.manifest = self._ask(("target", target), f"{target.locator} while importing it")
        return self.manifest

    trusted = staticmethod(InProcess.trusted)

    def fresh(self):
        """The same worker restarted: the implementation is imported anew, with no history."""
        self.close()
        self._spawn()
        self.use(self.target)
        return self

    def run(self, request):
        if self.proc is None:
            self._spawn()
            self.use(self.target)
        limit = limit_for(request, self.call_seconds)
        try:
            self.conn.send(("call", request))
        except OSError:
            self._died(request.describe())
        reply = self._receive(limit, request.describe())
        self._note_output()
        if reply[0] == "ok":
            return reply[1]
        raise ImplementationFailure(reply[1], reply[2], request.describe())

    def _receive(self, limit, call):
        try:
            ready = self.conn.poll(limit)
        except (OSError, EOFError):
            ready = True
        if not ready:
            self.close()
            raise ImplementationFailure(HUNG, f"no answer within {limit:g} s", call)
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self._died(call)

    def _died(self, call):
        code = self.proc.wait(timeout=5)
        self._note_output()
        self.close()
        if code is not None and code < 0:
            how = f"the process was killed by {signal.Signals(-code).name}"
        else:
            how = f"the process exited with code {code}"
        raise ImplementationFailure(CRASHED, how, call)

    def _note_output(self):
        if self.output is None:
            return
        size = self.output.seek(0, os.SEEK_END)
        if size and not self.notes:
            self.output.seek(0)
            first = self.output.read(200).decode("utf-8", "replace").strip().splitlines()
            line = first[0] if first else ""
            self.notes.append(f"the implementation printed output (first line: {line!r})")

    def close(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None
