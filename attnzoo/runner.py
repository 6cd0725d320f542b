"""Run one detector on one subject and turn whatever happens into a Finding.

Applicability is decided here, once, from the detector's ``NEEDS`` (detectors.kit.needs):
the parts that apply are handed to the detector through ``subject.parts``; when none does,
or the detector made no call at all, the verdict is n/a and the message says why.
"""

import copy
import time
import traceback

from detectors.kit.expect import Mismatch
from detectors.kit.needs import Needs, applicable
from detectors.kit.needs import parts as declared
from detectors.kit.verdict import (
    ERROR,
    NA,
    SURVIVED,
    UNSUPPORTED,
    Evidence,
    Finding,
    Flag,
    ImplementationFailure,
    NotApplicable,
    Unsupported,
    envelope,
)

# a detector is rerun without each case the target refuses; past this many, the rest is refused
MAX_RERUNS = 64


def run(detector, subject, battery, shrink=False, cases=False):
    """The detector's verdict on the subject; never raises for the implementation's sake.
    With ``shrink``, a flagged attention case is shrunk to a smaller one that still fails
    (attnzoo.shrink), added to the evidence; the verdict is decided before and stays. With
    ``cases``, a flagged detector also learns which of its other cases fail and which pass
    (``attnzoo.diagnosis.follow``, into ``finding.cases``): the verdict stays the first flag's."""
    subject.calls, subject.impl_seconds = 0, 0.0
    subject.log, subject.flagged = ({} if cases else None), None
    notes = getattr(subject.executor, "notes", [])
    seen = len(notes)
    finding = Finding(detector.NAME, subject.name, SURVIVED)
    first = None  # the first failing case's key, when per-case outcomes are asked for
    start = time.perf_counter()
    try:
        needs = getattr(detector, "NEEDS", Needs())
        parts, reason = applicable(needs, subject.target, subject.manifest)
        if not parts:
            raise NotApplicable(reason)
        subject.parts, subject.declared = parts, tuple(name for name, _ in declared(needs))
        subject.set_aside, subject.stopped = {}, None
        checked = _check(detector, subject, battery)
        aside = _aside(subject.set_aside)
        if not checked and subject.set_aside:
            finding.verdict = UNSUPPORTED
            finding.message = f"[{detector.NAME}] unsupported: " + (
                f"it cannot check its property without case {subject.stopped}" if subject.stopped
                else "every case is outside what the target supports") + aside
        elif not checked:  # a property checked on no call at all has not been checked
            raise NotApplicable("none of its cases applies to this target")
        else:
            finding.message = f"[{detector.NAME}] held on every " \
                f"{'supported ' if subject.set_aside else ''}case{aside}"
    except (Flag, Mismatch) as flag:
        if isinstance(flag, Mismatch):  # raised outside subject.case: the last call is the case
            sent = [_Sent(subject.last)] if subject.last is not None else []
            flag = Flag(flag, subject.evidence(sent, index=flag.index))
        finding.verdict, finding.evidence = flag.verdict, flag.evidence
        finding.message = envelope(detector.NAME, flag.text, flag.evidence.call)
        first = _first(subject, cases)  # before shrinking, which makes calls of its own
        if shrink:
            from attnzoo.shrink import smallest

            flag.evidence.shrunk = smallest(detector, subject, battery, flag.evidence.case,
                                            flag.verdict)
    except ImplementationFailure as failure:
        finding.verdict = failure.verdict
        call = subject.last
        described = call.describe(subject.name) if call is not None else failure.call
        finding.evidence = Evidence(
            described, expected="an answer", actual=failure.what,
            snippet=subject.evidence([_Sent(call)]).snippet if call is not None else "",
        )
        finding.message = envelope(detector.NAME, f"expected an answer, got {failure.what}",
                                   described)
        first = _first(subject, cases)
        if shrink:
            from attnzoo.shrink import smallest

            finding.evidence.shrunk = smallest(detector, subject, battery, subject.current,
                                               failure.verdict, failure.what)
    except NotApplicable as reason:
        finding.verdict, finding.message = NA, f"[{detector.NAME}] n/a: {reason}"
    except Exception as e:  # noqa: BLE001 - a detector bug is reported, never counted as a kill
        finding.verdict = ERROR
        where = traceback.extract_tb(e.__traceback__)[-1]
        finding.message = (
            f"[{detector.NAME}] detector error {type(e).__name__}: {e} "
            f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})"
        )
    finally:
        if cases and finding.caught:
            from attnzoo.diagnosis.follow import follow

            finding.cases = follow(detector, subject, battery, finding, first)
        subject.log, subject.left_out = None, ()
        subject.parts = subject.declared = ()
        subject.current = None
        finding.unsupported = dict(subject.set_aside)
    finding.seconds = time.perf_counter() - start
    finding.calls, finding.impl_seconds = subject.calls, subject.impl_seconds
    finding.notes = list(notes[seen:])  # what the implementation did during this detector
    return finding


def _first(subject, cases):
    """The key of the case that just failed, when per-case outcomes are asked for."""
    if not cases:
        return None
    from attnzoo.diagnosis.follow import failed_key

    return failed_key(subject)


def _check(detector, subject, battery):
    """Run the detector, again without each case the target turns out not to support (a
    declared feature met outside ``subject.cases``, or a refusal at run time), so one refused
    case hides nothing else. Whether any call was answered on the last, complete run."""
    for _ in range(MAX_RERUNS):
        calls = subject.calls
        try:
            detector.check(subject, _without(battery, subject))
            return subject.calls > calls
        except Unsupported as u:
            subject.current = None
            if u.case is None:  # the subject adapted itself (an E == Ev twin): run again
                continue
            if u.case in subject.set_aside:  # the detector cannot route around it: it stops
                subject.stopped = u.case  # what it checked held, but its property was not
                return False  # checked on every case it has: nothing may read as survived
            subject.set_aside[u.case] = u.why
    return False


def _without(battery, subject):
    """The battery without the cases set aside so far (and those ``subject.left_out``, which
    a flagged detector already failed), each list marking the case being iterated on the
    subject (a refusal of a call derived from it sets that case aside)."""
    from detectors.kit.cases import Cases

    left_out = set(subject.set_aside) | set(getattr(subject, "left_out", ()))
    if not left_out:
        return battery
    view = copy.copy(battery)
    for name in ("attention", "self_attention", "softmax"):
        kept = [c for c in getattr(battery, name) if c.name not in left_out]
        setattr(view, name, Cases(subject, kept, whole=getattr(battery, name)))
    return view


def _aside(set_aside):
    """`` (2 cases unsupported: name: why; …)`` for the message, or ""."""
    if not set_aside:
        return ""
    shown = "; ".join(f"{name}: {why[:120]}" for name, why in list(set_aside.items())[:3])
    more = f"; {len(set_aside) - 3} more" if len(set_aside) > 3 else ""
    return f" ({len(set_aside)} case{'s' if len(set_aside) > 1 else ''} unsupported: " \
        f"{shown}{more})"


class _Sent:
    """An answer-shaped holder for a request that got no answer."""

    def __init__(self, request):
        self.requests = (request,)
