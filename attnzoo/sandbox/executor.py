"""Where calls run: in this process (trusted zoo code) or in a worker process (anyone's code).

Both give every call a time limit, send it through :func:`decide.encode` and read its answer
through :func:`decide.decide`, and turn every way a call can go wrong into an
:class:`ImplementationFailure`, so a detector sees answers or failures and nothing else. Here:
what both share, and :class:`InProcess`; the worker process is :mod:`isolated`.
"""

import _signal  # signal's C functions: see InProcess._execute
import signal
import threading

from attnzoo.options import CALL_SECONDS
from attnzoo.sandbox import decide, probes
from attnzoo.sandbox.guard import CallTimeout
from attnzoo.sandbox.offer import manifest
from attnzoo.sandbox.target import BadTarget, load, renewed
from detectors.kit.verdict import CRASHED, HUNG, ImplementationFailure

GRADCHECK_FACTOR = 6  # gradcheck makes many calls
WALL_FACTOR = 6  # in-process: wall time allowed per second of the processor-time limit


def limit_for(request, seconds):
    return seconds * GRADCHECK_FACTOR if request.gradcheck else seconds


class DeadlineReached(BaseException):
    """The run's --deadline passed: no verdict on the call in flight (not an Exception, so no
    detector or runner can mistake it for the implementation's failure)."""


class InProcess:
    """Calls the implementation directly, with SIGALRM as the time limit where it can be set."""

    def __init__(self, target, obj=None, call_seconds=CALL_SECONDS, offers=None):
        self.target = target
        self.obj = load(target.locator) if obj is None else obj
        self.manifest = manifest(self.obj, target) if offers is None else offers
        self.call_seconds = call_seconds
        self.notes = []
        self.kept, self.handles, self.issued = {}, 0, []  # answers kept as returned

    def fresh(self):
        """An executor on a new instance of the implementation, with none of its history."""
        obj = renewed(self.obj)
        # the same class built the same way offers what this instance offers: its signatures
        # are read once per target, not once per cell of the kill matrix
        same = type(obj) is type(self.obj)
        return InProcess(self.target, obj, self.call_seconds, self.manifest if same else None)

    def spare(self):
        """Where calls that must not touch this instance's history go: a new instance, or
        this one when the object cannot be rebuilt into a usable target."""
        try:
            return self.fresh()
        except BadTarget:
            return self

    def run(self, request):
        header, buffers, sent = decide.encode(request, self.target)
        acted_on(self, request)
        handle = header["keep"] = new_handle(self, request)
        reply, out = self._execute(request, decide.for_worker(header, buffers))
        return kept_as(decide.decide(reply, out, sent, buffers, request, self.target), handle)

    def reread(self, handle):
        """The answer of a call made with ``keep`` as its arrays hold it now: (values, dtypes)."""
        still_kept(self, handle)
        reply, out = probes.reread(self.target, self.kept, handle)
        return decide.reread(reply, out, handle, self.target)

    def _execute(self, request, decoded):
        limit = limit_for(request, self.call_seconds)
        if threading.current_thread() is not threading.main_thread():
            return probes.execute(self.obj, self.target, self.manifest, decoded, self.kept)
        # _signal.signal, not signal.signal: the latter's wrapper turns handlers into enums and
        # back, and around a call of a small battery case that costs a tenth of the call
        # The limit is CPU time, so a loaded machine (a sweep, parallel test workers) cannot
        # turn a slow correct call into a hang; wall time WALL_FACTOR times longer still ends a
        # call that waits without computing.
        previous = (_signal.signal(signal.SIGALRM, _raise_timeout),
                    _signal.signal(signal.SIGPROF, _raise_timeout))
        signal.setitimer(signal.ITIMER_PROF, limit)
        signal.setitimer(signal.ITIMER_REAL, limit * WALL_FACTOR)
        try:
            return probes.execute(self.obj, self.target, self.manifest, decoded, self.kept)
        except CallTimeout:
            raise ImplementationFailure(
                HUNG, f"no answer within {limit:g} s of processor time "
                      f"({limit * WALL_FACTOR:g} s of wall time)", request.describe()
            ) from None
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.setitimer(signal.ITIMER_REAL, 0)
            _signal.signal(signal.SIGALRM, previous[0])
            _signal.signal(signal.SIGPROF, previous[1])

    @staticmethod
    def trusted(target):
        """Where this repository's own code (the reference) runs: here, directly."""
        return InProcess(target)

    def close(self):
        pass


def _raise_timeout(signum, frame):
    raise CallTimeout()


def new_handle(executor, request):
    """A new handle for an answer to keep, or None when the request does not ask for it; the
    executor remembers the last :data:`probes.KEPT`, which is what the target side keeps."""
    if not request.keep:
        return None
    executor.handles += 1
    executor.issued = (executor.issued + [executor.handles])[-probes.KEPT:]
    return executor.handles


def acted_on(executor, request):
    """Check that the kept calls a request's caller actions name (refill, overwrite) are still
    kept, before a new handle can push one out."""
    for handle in (request.refill, request.overwrite):
        if handle is not None:
            still_kept(executor, handle)


def still_kept(executor, handle):
    lost = getattr(executor, "lost", {})
    if handle in lost:  # charged, as the death that took it was, to earlier calls or not
        failure = ImplementationFailure(CRASHED, "the worker holding the answer was restarted",
                                        "re-reading a kept answer")
        failure.earlier = lost[handle]
        raise failure
    if handle not in executor.issued:  # a detector kept more than the target side holds
        raise LookupError(f"answer {handle} is no longer kept: at most {probes.KEPT} are")


def kept_as(result, handle):
    if handle is not None:
        result.kept = handle
    return result
