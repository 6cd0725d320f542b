"""Which cases a flagged detector fails and which it passes, at a bounded cost.

A detector stops at its first failing case. To learn the others' outcomes it is run again
without that case (its battery case left out, as a refused case is), until a run holds or
:data:`MAX_FAILED` cases have failed. Why reruns and not "keep going from where it stopped":
a detector is a function of the battery, not a loop the runner can step, and some compare
several cases at once (call order, the first three cases of a dtype); rerunning the detector
unchanged on a smaller battery keeps every property exactly as written. The price is that the
passing cases are rerun, so a flagged detector costs at most MAX_FAILED + 1 runs; detectors
that survive cost nothing extra, and only ``check`` and the survey ask (the kill matrix does
not). A case *passed* only when the run that sent it held: what a failing run sent before
failing is not counted, since a relation may not yet have been checked on it.
"""

from attnzoo.diagnosis import features
from detectors.kit.expect import Mismatch
from detectors.kit.verdict import (
    CRASHED,
    HUNG,
    Flag,
    ImplementationFailure,
    NotApplicable,
    envelope,
)

DTYPES = ("float64", "float32", "float16", "bfloat16")
MAX_FAILED = 32  # failing cases recorded per detector: at most 33 runs of a flagged one


def follow(detector, subject, battery, finding, first=None):
    """``{"failed": {key: record}, "passed": {key: record}, "complete": bool, "stopped": why}``
    where a record has the case's features, size and, when failed, its verdict, call, message
    and reproduction; ``complete`` means every case the detector runs has an outcome.
    ``first`` is the key of the case the finding failed on (``failed_key``, taken before any
    other call)."""
    from attnzoo.runner import _check
    from attnzoo.sandbox.executor import DeadlineReached

    sent = dict(subject.log or {})
    key = first or failed_key(subject)
    failed = {key: _failure(finding.verdict, finding.message, finding.evidence)}
    passed, stopped = {}, ""
    left_out = set()
    while not stopped:
        origin = _origin(key, battery)
        if finding.verdict == HUNG or len(failed) > MAX_FAILED:
            stopped = "a hang" if finding.verdict == HUNG else f"{MAX_FAILED} failing cases"
            break
        if origin is None:
            stopped = f"case {key!r} is not one the battery can leave out"
            break
        if origin in left_out:  # it indexes the battery past what is left: nothing new to learn
            stopped = f"case {key!r} came back after it was left out"
            break
        left_out.add(origin)
        subject.left_out, subject.log, subject.flagged = frozenset(left_out), {}, None
        subject.current = None
        try:
            if _check(detector, subject, battery):
                passed = {k: {} for k in subject.log}
            stopped = "held" if passed else "no case left"
        except (Flag, Mismatch) as flag:
            key = failed_key(subject)
            failed[key] = _from_flag(detector, subject, flag)
        except ImplementationFailure as failure:
            key = failed_key(subject)
            failed[key] = _failure(failure.verdict, envelope(detector.NAME, f"expected an answer"
                                   f", got {failure.what}", failure.call), _last(subject))
            if failure.verdict == HUNG:
                stopped = "a hang"
        except DeadlineReached:
            stopped = "the deadline"
        except (NotApplicable, Exception) as e:  # noqa: BLE001 - keep what was learnt so far
            stopped = f"{type(e).__name__} on a rerun"
        finally:
            sent.update(subject.log or {})
    alignment = subject.target.causal_alignment
    cause = getattr(detector, "CAUSE", None)
    for k, record in list(failed.items()) + list(passed.items()):
        call, request = sent.get(k, (None, None))
        dtype = request.dtype if request is not None else subject.base_dtype
        spec = features.of(call, request, subject.base_dtype, alignment) \
            if request is not None else []
        record["features"] = spec
        if cause == "dtype" and dtype in DTYPES:  # a property of the inputs' dtype: its feature
            if "verdict" not in record:  # a pass: both, so it counts as evidence either way
                record["features"] = sorted({*spec, f"dtype:{dtype}"}, key=features.rank)
            elif record["verdict"] not in (CRASHED, HUNG):  # a crash is no finding about dtypes
                record["features"] = [f"dtype:{dtype}"]
        # (the causal mask's bool is not an input dtype: its case is read as any other)
        record["size"] = features.size(call) if call is not None else None
    return {"failed": failed, "passed": passed, "complete": stopped in ("held", "no case left"),
            "stopped": stopped, "cause": cause}


def failed_key(subject):
    """The case that just failed: the one named by the failed relation, else the last call's."""
    if subject.flagged is not None:
        return subject.flagged
    last = subject.last
    if last is None:
        return subject.current or "?"
    name = subject.current or getattr(last, "case", None) or last.describe()
    return subject.case_key(name, last.dtype)


def _failure(verdict, message, evidence):
    return {"verdict": verdict, "message": message,
            "call": evidence.call if evidence is not None else "",
            "snippet": evidence.snippet if evidence is not None else ""}


def _last(subject, index=None):
    """Evidence of the last call sent: its description and a reproduction."""
    from attnzoo.runner import _Sent

    return subject.evidence([_Sent(subject.last)] if subject.last else [], index=index)


def _from_flag(detector, subject, flag):
    if isinstance(flag, Mismatch):  # raised outside subject.case: the last call is the case
        flag = Flag(flag, _last(subject, flag.index))
    return _failure(flag.verdict, envelope(detector.NAME, flag.text, flag.evidence.call),
                    flag.evidence)


def _origin(key, battery):
    """The battery case a failing case came from: its own name, or the case a detector derived
    it from (``heads (all masked)`` from ``heads``), without the dtype it was sent at."""
    name = next((key[:-len(f" at {d}")] for d in DTYPES if key.endswith(f" at {d}")), key)
    names = [c.name for c in battery.attention + battery.self_attention + battery.softmax]
    found = [n for n in names if name == n or name.startswith((n + " ", n + ","))]
    return max(found, key=len, default=None)


def lighten(findings):
    """Drop the failing cases' reproductions once the diagnosis has kept its smallest ones: a
    reproduction of a standard-depth case prints every input, tens of kB each."""
    for f in findings:
        for record in (f.cases or {}).get("failed", {}).values():
            record.pop("snippet", None)
