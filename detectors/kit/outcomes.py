"""What one detector's run found, case by case: the unit of execution is the case.

A detector iterates its cases inside ``subject.trial(call)``. A case that fails (a relation
that does not hold, a crash, NaN where a number was due) is recorded here with its evidence and
the detector goes on with the next case; a case the target refuses is set aside the same way.
The detector's verdict is still its first failure. So a flagged detector costs what a clean
one does, and the diagnosis reads outcomes this record already holds instead of rerunning
anything. Where only the verdict is wanted (the kill matrix), ``keep_going`` is off and the
first failure ends the run, as it always did.
"""

from dataclasses import dataclass

from detectors.kit.verdict import HUNG
from reference import FLOAT_DTYPES as FLOATS

MAX_FAILED = 32  # failing cases recorded per detector before it stops


@dataclass(frozen=True)
class CaseId:
    """One case as the diagnosis counts it: the battery case it comes from (``spec``, with
    its repeat, ``heads#1``), the detector's own ``variant`` of it (`` (all masked)``, kept
    with its separator), and the ``dtype`` it was sent at where that is not the run's. ``str``
    is the name reports print."""

    spec: str
    variant: str = ""
    dtype: str | None = None

    def __str__(self):
        return f"{self.spec}{self.variant}" + (f" at {self.dtype}" if self.dtype else "")

    @classmethod
    def of(cls, name, dtype, base_dtype, within=None):
        """The id of a case a detector named ``name`` (``within`` the battery case being
        tried, whose variant it may be), sent at ``dtype``. A detector that names the dtype
        itself (``heads at float32``) is read the same way."""
        named = next((d for d in FLOATS if name.endswith(f" at {d}")), None)
        if named:
            name = name[:-len(f" at {named}")]
        dtype = dtype if dtype not in (None, base_dtype) else named
        if within and name != within and name.startswith((within + " ", within + ",")):
            return cls(within, name[len(within):], None if dtype == base_dtype else dtype)
        return cls(name, "", None if dtype == base_dtype else dtype)


@dataclass
class Outcome:
    """A failing case: its verdict, the finding's message and the evidence."""

    verdict: str
    message: str
    evidence: object  # detectors.kit.verdict.Evidence, or None
    error: Exception  # the Flag or ImplementationFailure, for the finding of the first one
    case: str = ""  # the battery case it failed on, where one was being tried (for shrinking)


class Stop(Exception):
    """Ends a detector's run early: after a hang, or when enough cases have failed."""


class Record:
    """Outcomes of one detector on one subject, in the order met; the runner owns it."""

    def __init__(self, detector="", keep_going=False):
        self.detector, self.keep_going = detector, keep_going
        self.failed = {}  # CaseId -> Outcome, the first failure of each case
        self.sent = {}  # CaseId -> (call, request): what each case sent, for its features
        self.tainted = set()  # ids sent inside a trial that failed: they did not pass
        self.set_aside = {}  # case name -> why it is unsupported
        self.stopped = ""  # why the run ended before its last case ("" when it did not)
        self.unfinished = None  # the case whose refusal the detector could not route around
        self.checked = True  # did the run answer any call (set when it ends)
        self.calls, self.impl_seconds = 0, 0.0  # calls answered, and the time inside them

    @property
    def first(self):
        return next(iter(self.failed.values()), None)

    def note(self, case_id, call, request):
        self.sent.setdefault(case_id, (call, request))

    def fail(self, case_id, outcome, sent_in_trial=()):
        """Record a failing case; raise the failure again when the run must end here."""
        if any(o.error is outcome.error for o in self.failed.values()):
            return  # met again on its way out of an outer trial
        self.failed.setdefault(case_id, outcome)
        self.tainted.update(sent_in_trial)
        if not self.keep_going:
            raise outcome.error
        if outcome.verdict == HUNG:
            self.stopped = "a hang"
            raise Stop(self.stopped)
        if len(self.failed) > MAX_FAILED:
            self.stopped = f"{MAX_FAILED} failing cases"
            raise Stop(self.stopped)

    def passed(self):
        """Cases sent and never part of a failing trial."""
        return [k for k in self.sent if k not in self.failed and k not in self.tainted]
