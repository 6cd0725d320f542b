"""Where calls run: in this process (trusted zoo code) or in a worker process (anyone's code).

Both give every call a time limit, send it through :func:`decide.encode` and read its answer
through :func:`decide.decide`, and turn every way a call can go wrong into an
:class:`ImplementationFailure`, so a detector sees answers or failures and nothing else. Here:
what both share, and :class:`InProcess`; the worker process is :mod:`isolated`.
"""

import _signal  # signal's C functions: see InProcess._execute
import dataclasses
import signal
import threading

import numpy as np

from attnzoo.options import CALL_SECONDS
from attnzoo.sandbox import decide, probes
from attnzoo.sandbox.guard import CallTimeout
from attnzoo.sandbox.offer import manifest
from attnzoo.sandbox.target import BadTarget, load, renewed
from detectors.kit.verdict import CRASHED, HUNG, ImplementationFailure

GRADCHECK_FACTOR = 6  # gradcheck makes many calls
WALL_FACTOR = 6  # in-process: wall time allowed per second of the processor-time limit


def limit_for(request, seconds):
    """A request's time limit: gradcheck's many calls have more, and a request that makes a
    second call before its backward (``Request.between``) has two calls' time."""
    if request.gradcheck:
        return seconds * GRADCHECK_FACTOR
    return seconds * 2 if request.between is not None else seconds


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
        header, buffers, sent = decide.encode(request, self.target, words=False)
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
        return Trusted(target)

    def close(self):
        pass


class Trusted(InProcess):
    """The reference, here: a pure function of what it is asked, so an answer it gave once is
    given again (a copy) instead of computed again. The kill matrix asks it the same gradients
    and errors on every row; only the reference's own answers are remembered, never a target's.
    A request that draws random numbers, seeds them, or keeps or acts on a kept answer always
    runs, so what the process's random streams hold stays as if every call had run."""

    REMEMBERED = 4096  # answers at most; past that, new ones run every time

    def __init__(self, target, obj=None, call_seconds=CALL_SECONDS, offers=None):
        super().__init__(target, obj, call_seconds, offers)
        self.answers = {}

    def run(self, request):
        key = _pure(request)
        if key is None:
            return super().run(request)
        if key not in self.answers:
            result = super().run(request)
            if len(self.answers) >= self.REMEMBERED:
                return result
            self.answers[key] = result
        return _copied(self.answers[key])


def _pure(request):
    """What a request's answer depends on, as a key, or None where running it has effects
    beyond its answer (random draws or seeds, kept answers, inputs read back)."""
    if (request.keep or request.refill is not None or request.overwrite is not None
            or request.seed is not None or request.kwargs.get("dropout_p")
            or request.inputs or request.guarded):
        return None
    try:
        return tuple((f.name, _frozen(getattr(request, f.name)))
                     for f in dataclasses.fields(request))
    except TypeError:  # a field this key cannot hold: the request simply runs
        return None


def _frozen(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return ("dict",) + tuple((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(_frozen(v) for v in value)
    if isinstance(value, float):
        return ("float", repr(value))  # -0.0 is not 0.0 here
    if value is None or isinstance(value, (bool, int, str)):
        return (type(value).__name__, value)
    raise TypeError(f"a request field of type {type(value).__name__}")


def _copied(result):
    """A result whose arrays are new copies: whoever is given it may write into them."""
    grads = None if result.grads is None else {
        n: None if g is None else g.copy() for n, g in result.grads.items()}
    return dataclasses.replace(result, values=tuple(np.array(v, copy=True) for v in result.values),
                               grads=grads)


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
