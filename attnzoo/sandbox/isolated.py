"""The worker-process executor: anyone's code, in a process of its own (see :mod:`executor`
for what both executors share).

The worker speaks the data-only protocol of :mod:`wire` (nothing it sends is unpickled), a hang
is killed, a crash or ``sys.exit`` takes only the worker down, its output is captured and
capped, and its whole process group goes with it (:mod:`hygiene`).
"""

import os
import signal
import time

import numpy as np

from attnzoo.inert import inert
from attnzoo.options import CALL_SECONDS
from attnzoo.options import IMPORT_SECONDS as LOAD_SECONDS
from attnzoo.sandbox import decide, hygiene, offer, wire
from attnzoo.sandbox.executor import (
    DeadlineReached,
    InProcess,
    acted_on,
    kept_as,
    limit_for,
    new_handle,
    still_kept,
)
from attnzoo.sandbox.target import ZOO_ATTRIBUTES, BadTarget
from detectors.kit.verdict import CRASHED, HUNG, ImplementationFailure


class Isolated:
    """Runs the implementation in a worker process, restarted after a hang or a crash.

    Time: importing gets ``load_seconds``; the first call of each function in each worker gets
    ``warmup_seconds`` (a compile, a cache fill) unless that function already hung through
    one; every other call ``call_seconds``; nothing runs past ``deadline`` (a
    time.monotonic() value), which raises DeadlineReached. Every worker is confined to
    ``isolation`` (:class:`attnzoo.sandbox.confine.Isolation`; None: not confined).
    """

    def __init__(self, target=None, call_seconds=CALL_SECONDS, load_seconds=LOAD_SECONDS,
                 warmup_seconds=None, deadline=None, on_call=None, isolation=None):
        self.target = target
        self.isolation = isolation
        self.call_seconds = call_seconds
        self.load_seconds = load_seconds
        self.warmup_seconds = call_seconds if warmup_seconds is None else warmup_seconds
        self.deadline = deadline
        self.on_call = on_call
        self.notes = []
        self.proc = self.sock = self.output = None
        self.warm, self.hung_cold = set(), set()
        self.manifest = None
        self.handles, self.issued = 0, []  # answers the worker keeps
        self.lost = {}  # handle -> the earlier calls its worker's death was charged to (or 0)
        self.pinned = []  # handles of the first answers this worker returned, kept to its end
        self.dies_alone = set()  # kinds of call (:func:`_kind`) that died alone in a fresh worker
        self.first = {}  # handle -> (request, values): a pinned answer as returned
        self.final = {}  # handle -> (values, dtypes): the same, read when its worker ended
        self._spawn()
        if target is not None:
            self.use(target)

    def _spawn(self):
        parent, child = wire.pair()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            self.proc, self.output = hygiene.spawn(child.fileno(), env, self.isolation)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.sock = parent
        self.warm = set()
        self.answered = 0  # calls this worker has answered: a death after some may be theirs
        self._lose()

    # -- loading ---------------------------------------------------------------------------

    def _ask(self, header, what, seconds=None):
        """Send a message and wait for its answer; a non-answer while loading is BadTarget."""
        seconds = seconds or self.load_seconds
        try:
            reply, _ = self._exchange(header, (), seconds, what)
        except ImplementationFailure as e:
            if e.verdict == HUNG:
                raise BadTarget(f"{what}: not done within {seconds:g} s: raise --import-timeout "
                                "if it is only slow, or fix the module") from None
            raise BadTarget(f"{what}: {e.what}: fix the module") from None
        if reply.get("bad") is not None:
            raise BadTarget(inert(str(reply["bad"])[:2000]))
        return reply

    def describe(self, locator):
        """What the locator names, as :func:`target.describe` says it; anything else the
        worker sends is BadTarget, never a fault of attnzoo."""
        info = self._ask({"verb": "describe", "locator": locator},
                         f"{locator} while importing it").get("described")
        if not _description(info):
            raise BadTarget(f"{locator} while importing it: the worker sent no usable "
                            "description: fix the module")
        return dict(info, id=inert(info["id"])) if info["kind"] == "zoo" else info

    def infer_backend(self, locator):
        """Which array library a lesson module speaks, by one probe call under the time limit.

        The probe runs the target's own code, so it is a call like any other: if it hangs or
        takes the worker down, the worker is restarted and the answer is "don't know".
        """
        try:
            reply, _ = self._exchange({"verb": "infer", "locator": locator}, (),
                                      self.warmup_seconds, f"{locator}: causal_mask(2)")
        except ImplementationFailure:
            self.close()
            self._spawn()
            return None
        answer = reply.get("inferred")
        return answer if answer in ("numpy", "torch") else None

    def use(self, target):
        self.target = target
        what = f"{target.locator} while importing it"
        reply = self._ask({"verb": "target", "target": vars(target)}, what)
        try:
            self.manifest = offer.decide(reply.get("ready"), target)
        except offer.Malformed:
            raise BadTarget(f"{what}: the worker sent no usable list of functions: "
                            "fix the module") from None
        return self.manifest

    @staticmethod
    def trusted(target):
        """The reference, in this process. A check has one subject, so its reference is seldom
        asked the same call twice: unlike the kill matrix's (:class:`Trusted`), it remembers
        nothing, and pays no key for each call."""
        return InProcess(target)

    def fresh(self):
        """The same worker restarted: the implementation is imported anew, with no history.
        The answers kept to the end of the run are read first, for the last time: the end of
        the run compares with that reading (:meth:`reread`)."""
        self._read_pinned()
        self.close()
        self._spawn()
        self.use(self.target)
        return self

    def _read_pinned(self):
        """Read the pinned answers of the live worker, once, before it goes."""
        for handle in self.pinned:
            if self.proc is None or handle in self.final:
                continue
            try:
                reply, out = self._exchange({"verb": "reread", "handle": handle}, (),
                                            self.call_seconds, "re-reading a kept answer")
                self.final[handle] = decide.reread(reply, out, handle, self.target)
            except ImplementationFailure:  # no reading, so nothing is claimed of it
                return

    def cold(self, fn):
        """The next call of ``fn`` is a warm-up again (a new shape, for a library that compiles
        per shape), unless ``fn`` already hung through one."""
        if fn not in self.hung_cold:
            self.warm.discard(fn)

    def spare(self):
        """Where calls that must not touch this run's history would go: this worker itself,
        since a second worker would double the import; its calls simply come first."""
        return self

    # -- calls -----------------------------------------------------------------------------

    def run(self, request):
        if self.proc is None:
            self._spawn()
            self.use(self.target)
        limit = limit_for(request, self.call_seconds)
        cold = request.fn not in self.warm and request.fn not in self.hung_cold
        if cold:
            limit = max(limit, self.warmup_seconds)
        header, buffers, sent = decide.encode(request, self.target)
        acted_on(self, request)
        handle = header["keep"] = new_handle(self, request)
        pin = handle is None and self._pinned_first(request)
        if pin:  # one of the worker's first answers: kept to its end, unasked
            self.handles += 1
            handle = header["keep"] = self.handles
            header["pin"] = True
            self.pinned.append(handle)
        earlier = self.answered
        try:
            reply, out = self._exchange(dict(header, verb="call"), buffers, limit,
                                        request.describe())
        except ImplementationFailure as e:
            if cold and e.verdict == HUNG:  # it hung through its warm-up: no second allowance
                self.hung_cold.add(request.fn)
            if e.died and earlier:
                self._alone(e, header, buffers, request, earlier)
            raise
        finally:
            self._note_output()
        self.answered += 1
        self.warm.add(request.fn)
        if self.on_call is not None:
            self.on_call()
        if "fail" in reply:
            what = reply.get("what")
            if reply["fail"] != CRASHED or not isinstance(what, str):
                what = "sent a failure attnzoo cannot read"
            raise ImplementationFailure(CRASHED, inert(what[:2000]), request.describe())
        result = decide.decide(reply, out, sent, buffers, request, self.target)
        if pin:
            self.first[handle] = (request, result.values)
            return result
        return kept_as(result, handle)

    def _lose(self, earlier=0):
        """What the old worker kept died with it."""
        for handle in self.issued + self.pinned:
            self.lost.setdefault(handle, earlier)
        self.issued, self.pinned = [], []

    def _alone(self, died, header, buffers, request, earlier):
        """The worker died on a call after answering ``earlier`` others: send the same call
        alone to a fresh worker, and say what that shows. An answer there charges the death to
        what the earlier calls left behind (``died.earlier``); the finding stays a crash either
        way, so a crash that comes and goes is never hidden. A call that acts on a kept answer
        cannot be sent alone, and is left as it was."""
        if header.get("refill") is not None or header.get("overwrite") is not None:
            return
        kind = _kind(header)
        if kind in self.dies_alone:  # one of its kind died or hung alone: not tried again
            return
        limit = max(limit_for(request, self.call_seconds), self.warmup_seconds)
        lone = dict(header, verb="call", keep=None, pin=False)
        gone = self.issued + self.pinned
        try:
            self._spawn()
            self.use(self.target)
            reply, _ = self._exchange(lone, buffers, limit, request.describe())
        except ImplementationFailure as again:
            if again.died or again.verdict == HUNG:  # as costly to try as it is telling
                self.dies_alone.add(kind)
            if again.died:
                died.reword(died.what + "; it dies again when sent alone to a fresh process")
            return  # a hang or a raise alone: the death is still this call's to explain
        except (BadTarget, DeadlineReached):  # no fresh worker, or no time: nothing is shown
            self.close()
            return
        self.answered += 1
        self.warm.add(request.fn)
        if "fail" in reply:
            return
        died.earlier = earlier
        self.lost.update(dict.fromkeys(gone, earlier))
        died.reword(f"{died.what} after answering {earlier} earlier calls; sent alone to a "
                    "fresh process, the same call answers, so the crash comes from what the "
                    "earlier calls left behind")

    def _pinned_first(self, request):
        """Is this one of the first :data:`FIRST` plain answers of this worker?"""
        return (len(self.pinned) < FIRST and request.fn in ("sdpa", "attention", "softmax")
                and request.grad is None and not request.gradcheck
                and request.refill is None and request.overwrite is None)

    def ended(self):
        """[(request, values as returned, values at the end)] of each pinned answer that
        changed: every worker's first answers, read when it was restarted or now (the end of
        the run). An answer whose worker died before it could be read is not judged."""
        self._read_pinned()
        changed = []
        for handle, (request, values) in self.first.items():
            if handle in self.final and not _same(values, self.final[handle][0]):
                changed.append((request, values, self.final[handle][0]))
        return changed

    def reread(self, handle):
        """The answer of a call made with ``keep`` as the worker's arrays hold it now."""
        if self.proc is None:  # it died since: what it kept is gone with it
            self._lose()
        still_kept(self, handle)
        reply, out = self._exchange({"verb": "reread", "handle": handle}, (),
                                    self.call_seconds, "re-reading a kept answer")
        return decide.reread(reply, out, handle, self.target)

    def _exchange(self, header, buffers, limit, call):
        """Send one message and read one reply within ``limit`` seconds (and the deadline)."""
        cut = self.deadline is not None and time.monotonic() + limit > self.deadline
        wait = max(0.0, self.deadline - time.monotonic()) if cut else limit
        start = time.monotonic()
        try:
            self.sock.settimeout(wait)
            wire.send(self.sock, header, buffers)
            if not hygiene.wait_readable(self.sock, self.output, wait):
                raise TimeoutError()
            reply, out = wire.read(self.sock, max(0.001, wait - (time.monotonic() - start)))
        except TimeoutError:
            self.close()
            if cut:
                raise DeadlineReached() from None
            raise ImplementationFailure(HUNG, f"no answer within {limit:g} s", call) from None
        except (EOFError, OSError):
            self._died(call)
        except wire.Malformed as e:
            self.close()
            raise ImplementationFailure(
                CRASHED, inert(f"broke attnzoo's protocol: {e}"), call) from None
        finally:
            if self.output is not None:
                self.output.drain()
        if not isinstance(reply, dict):
            self.close()
            raise ImplementationFailure(CRASHED, "broke attnzoo's protocol: not a message", call)
        return reply, out

    def _died(self, call):
        try:
            code = self.proc.wait(timeout=1)
        except Exception:  # noqa: BLE001 - alive, but its end of the connection is gone
            code = None
        self.close()
        if code is None:
            how = "the process closed its connection to attnzoo"
        elif code < 0:
            how = f"the process was killed by {signal.Signals(-code).name}"
        else:
            how = f"the process exited with code {code}"
        raise ImplementationFailure(CRASHED, how, call, died=True) from None

    def _note_output(self):
        """Say (once) that the implementation printed, and (once) when its output was capped."""
        out = self.output
        if out is None or not out.total:
            return
        if not any(n.startswith(_PRINTED) for n in self.notes):
            self.notes.append(f"{_PRINTED} (first line: {out.first_line()!r})")
        dropped = out.dropped()
        if dropped and not out.noted_drop:
            out.noted_drop = True
            self.notes.append(f"{_PRINTED} past the {hygiene.HEAD + hygiene.TAIL} bytes kept "
                              f"(head and tail): {dropped} bytes dropped so far")

    def close(self):
        if self.proc is not None:
            hygiene.kill(self.proc)
            self.output.drain()
            self.output.stream.close()
        if self.sock is not None:
            self.sock.close()
        self.proc = self.sock = None


_PRINTED = "the implementation printed output"
FIRST = 6  # answers each worker keeps from its first calls, read again when it ends


def _kind(header):
    """What a call passes, without its sizes or values: the function, how many positional
    arguments, which keywords are set, whether a gradient is asked. One call of a kind that died
    or hung alone in a fresh worker speaks for the others: each try costs a new worker and, for
    a library that compiles, a compile."""
    def given(v):
        return "array" in v or v.get("value") not in (None, False, 0, 0.0)
    return (header["fn"], len(header["args"]),
            tuple(sorted(k for k, v in header["kwargs"].items() if given(v))),
            header.get("grad") is not None or bool(header.get("gradcheck")))


def _same(before, after):
    """Bit for bit the same arrays (NaN where NaN was)."""
    return len(before) == len(after) and all(
        a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
        for a, b in zip(map(np.asarray, before), map(np.asarray, after)))
ID = 200  # characters of a zoo id


def _description(info):
    """Whether ``info`` is a description :func:`target.describe` could have made: a kind, and
    for a zoo file a plain id and the attribute of each implementation by its backend."""
    if not isinstance(info, dict) or info.get("kind") not in ("zoo", "lesson", "callable"):
        return False
    if info["kind"] != "zoo":
        return True
    found, name = info.get("implementations"), info.get("id")
    return (isinstance(name, str) and 0 < len(name) <= ID and isinstance(found, dict)
            and all(b in ZOO_ATTRIBUTES and found[b] == ZOO_ATTRIBUTES[b] for b in found))
