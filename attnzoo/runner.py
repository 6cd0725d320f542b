"""Run one detector on one subject and turn whatever happens into a Finding.

Applicability is decided here, once, from the detector's ``NEEDS`` (detectors.kit.needs):
the parts that apply are handed to the detector through ``subject.parts``; when none does,
or the detector made no call at all, the verdict is n/a and the message says why.
"""

import time
import traceback

from detectors.kit.expect import Mismatch
from detectors.kit.needs import Needs, applicable
from detectors.kit.needs import parts as declared
from detectors.kit.verdict import (
    ERROR,
    NA,
    SURVIVED,
    Evidence,
    Finding,
    Flag,
    ImplementationFailure,
    NotApplicable,
    envelope,
)


def run(detector, subject, battery):
    """The detector's verdict on the subject; never raises for the implementation's sake."""
    subject.calls, subject.impl_seconds = 0, 0.0
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
        detector.check(subject, battery)
        if subject.calls == 0:  # a property checked on no call at all has not been checked
            raise NotApplicable("none of its cases applies to this target")
        finding.message = f"[{detector.NAME}] held on every case"
    except (Flag, Mismatch) as flag:
        if isinstance(flag, Mismatch):  # raised outside subject.case: the last call is the case
            sent = [_Sent(subject.last)] if subject.last is not None else []
            flag = Flag(flag, subject.evidence(sent, index=flag.index))
        finding.verdict, finding.evidence = flag.verdict, flag.evidence
        finding.message = envelope(detector.NAME, flag.text, flag.evidence.call)
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
        subject.parts = subject.declared = ()
    finding.seconds = time.perf_counter() - start
    finding.calls, finding.impl_seconds = subject.calls, subject.impl_seconds
    finding.notes = list(notes[seen:])  # what the implementation did during this detector
    return finding


class _Sent:
    """An answer-shaped holder for a request that got no answer."""

    def __init__(self, request):
        self.requests = (request,)
