"""Run one detector on one subject and turn whatever happens into a Finding.

Applicability is decided here, once, from the detector's ``NEEDS`` (detectors.kit.needs):
the parts that apply are handed to the detector through ``subject.parts``; when none does,
or the detector made no call at all, the verdict is n/a and the message says why.

Each detector runs once. Its cases record their own outcomes (``subject.trial``,
detectors.kit.outcomes): the verdict is the first failure, and with ``cases`` the detector goes
on past it so every case has an outcome for the diagnosis, at the cost of one clean run.
"""

import time
import traceback

from attnzoo.diagnosis.cases import per_case
from attnzoo.sandbox.executor import DeadlineReached
from attnzoo.shrink import smallest
from detectors.kit.expect import Mismatch
from detectors.kit.needs import Needs, applicable
from detectors.kit.needs import parts as declared
from detectors.kit.outcomes import Record, Stop
from detectors.kit.verdict import (
    ERROR,
    NA,
    SURVIVED,
    UNSUPPORTED,
    Finding,
    Flag,
    ImplementationFailure,
    NotApplicable,
    Unsupported,
)


def run(detector, subject, battery, shrink=False, cases=False, shared=None, snippet=True):
    """The detector's verdict on the subject; never raises for the implementation's sake.
    With ``shrink``, a flagged attention case is shrunk to a smaller one that still fails
    (attnzoo.shrink), added to the evidence; the verdict is decided before and stays. With
    ``cases``, a flagged detector also reports which of its cases fail and which pass
    (``finding.cases``), learnt in the same run: the verdict stays the first failure's.
    ``shared`` (attnzoo.shrink.Shared, one per subject of a check) is what the shrinks of
    its detectors share: the smallest cases found so far, and the time they may take.
    Without ``snippet`` the first failure's reproduction is never written (a kill matrix
    shown as text prints none)."""
    record = subject.run = Record(detector.NAME, keep_going=cases)
    notes = getattr(subject.executor, "notes", [])
    seen = len(notes)
    finding = Finding(detector.NAME, subject.name, SURVIVED)
    start = time.perf_counter()
    try:
        needs = getattr(detector, "NEEDS", Needs())
        parts, reason = applicable(needs, subject.target, subject.manifest)
        if not parts:
            raise NotApplicable(reason)
        subject.parts, subject.declared = parts, tuple(name for name, _ in declared(needs))
        _check(detector, subject, battery)
        _conclude(finding, detector, subject, record)
    except (Flag, Mismatch, ImplementationFailure) as failure:  # it ended the run
        if not any(o.error is failure for o in record.failed.values()):  # met outside a trial
            record.failed.setdefault(subject.failed_id(), subject.outcome(failure))
        _conclude(finding, detector, subject, record)
    except NotApplicable as reason:
        finding.verdict, finding.message = NA, f"[{detector.NAME}] n/a: {reason}"
    except Exception as e:  # noqa: BLE001 - a detector bug is reported, never counted as a kill
        where = traceback.extract_tb(e.__traceback__)[-1]
        error = (f"detector error {type(e).__name__}: {e} "
                 f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
        if record.first is not None:  # past its first failure: the verdict is that failure's
            record.stopped = error
            _conclude(finding, detector, subject, record)
        else:
            finding.verdict, finding.message = ERROR, f"[{detector.NAME}] {error}"
    finding.unsupported = dict(record.set_aside)
    subject.current = None
    if finding.evidence is not None:
        if snippet:
            finding.evidence.resolve()  # the first failure's reproduction: the others wait
        else:
            finding.evidence.make = None
    if shared is not None:
        shared.ran += time.perf_counter() - start  # the detector's own time, before shrinking
    if finding.caught:
        if cases:
            finding.cases = per_case(detector, subject, record)
        if shrink:
            first = record.first
            finding.evidence.shrunk = smallest(detector, subject, battery, first.case,
                                               finding.verdict, getattr(first.error, "what", ""),
                                               shared)
    subject.parts = subject.declared = ()
    finding.seconds = time.perf_counter() - start
    finding.calls, finding.impl_seconds = record.calls, record.impl_seconds
    finding.notes = list(notes[seen:])  # what the implementation did during this detector
    return finding


class _AtEnd:
    """A detector's ``at_end``, run as a detector of its own name, so that what fails there is
    a finding like any other."""

    def __init__(self, detector, ended):
        self.NAME, self.detector, self.ended = detector.NAME, detector, ended
        self.NEEDS = getattr(detector, "NEEDS", Needs())

    def check(self, subject, battery):
        self.detector.at_end(subject, self.ended)


def end_of_run(chosen, subject, findings):
    """The findings once every detector has run. Each worker keeps its first answers to its
    end (attnzoo.sandbox.isolated); those that changed since they were returned go to every
    detector with ``at_end``, and where that fails, and the detector had held, the failure is
    its finding. An executor that keeps nothing to the end (in-process) changes nothing."""
    ended = getattr(subject.executor, "ended", None)
    changed = ended() if ended is not None else []
    out = list(findings)
    for detector in chosen:
        mine = [i for i, f in enumerate(out) if f.detector == detector.NAME]
        if not changed or not hasattr(detector, "at_end") or not mine \
                or out[mine[0]].verdict != SURVIVED:
            continue
        late = run(_AtEnd(detector, changed), subject, None)
        if late.caught:
            held = out[mine[0]]
            late.seconds += held.seconds
            late.calls += held.calls
            late.impl_seconds += held.impl_seconds
            late.tiers, late.unsupported = held.tiers, held.unsupported
            out[mine[0]] = late
    return out


def _check(detector, subject, battery):
    """Run the detector once. A refusal no trial caught ends it, with that case unfinished; a
    hang, or enough failing cases, stops a run that goes on past its first failure; so does
    the deadline once something has failed (what was learnt is kept)."""
    calls = subject.calls
    try:
        detector.check(subject, battery)
    except Unsupported as u:
        subject.run.set_aside.setdefault(u.case or "?", u.why)
        subject.run.unfinished = u.case or "?"
    except Stop:
        pass
    except DeadlineReached:
        if subject.run.first is None:
            raise
        subject.run.stopped = "the deadline"
    subject.run.checked = subject.calls > calls


def _conclude(finding, detector, subject, record):
    """The verdict and message from what the run recorded."""
    name, aside = detector.NAME, _aside(record.set_aside)
    first = record.first
    if first is not None:
        finding.verdict, finding.message, finding.evidence = (first.verdict, first.message,
                                                              first.evidence)
    elif record.unfinished or (not record.checked and record.set_aside):
        finding.verdict = UNSUPPORTED
        finding.message = f"[{name}] unsupported: " + (
            f"it cannot check its property without case {record.unfinished}"
            if record.unfinished else "every case is outside what the target supports") + aside
    elif not record.checked:  # checked on no call at all: not checked
        raise NotApplicable("none of its cases applies to this target")
    else:
        finding.message = f"[{name}] held on every " \
            f"{'supported ' if record.set_aside else ''}case{aside}"


def _aside(set_aside):
    """`` (2 cases unsupported: name: why; …)`` for the message, or ""."""
    if not set_aside:
        return ""
    shown = "; ".join(f"{name}: {why[:120]}" for name, why in list(set_aside.items())[:3])
    more = f"; {len(set_aside) - 3} more" if len(set_aside) > 3 else ""
    return f" ({len(set_aside)} case{'s' if len(set_aside) > 1 else ''} unsupported: " \
        f"{shown}{more})"
