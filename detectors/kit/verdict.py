"""Verdicts, evidence and the one envelope every failure message uses.

Envelope: ``[detector] expected …, got … [impl(call with shapes)]`` — what should have come back,
what came back, and for which call, as array-api-tests reports a failure. A relation between two
of the implementation's own outputs reads ``[detector] f(x)[i] = …, f(x′)[i] = …, should be
equal (…) [calls]`` instead: neither output is the expected one.
"""

from dataclasses import dataclass, field
from enum import StrEnum


class Verdict(StrEnum):
    """What one detector says of one implementation; a str, so JSON and reports spell it."""

    KILLED = "killed"  # a wrong value: first offending index, expected, actual
    NAN = "nan"  # NaN or inf where a finite value was due
    CRASHED = "crashed"  # it raised or returned something that is not an answer
    HUNG = "hung"  # it ran past the per-call time limit or took its process down
    SURVIVED = "survived"  # the property held on every case
    NA = "n/a"  # the implementation lacks what the detector needs
    UNSUPPORTED = "unsupported"  # every case it would check is outside what the target supports
    ERROR = "error"  # the detector itself failed: never a kill

    @property
    def caught(self):
        """Does this verdict flag the implementation? (the one definition of "caught")"""
        return self in (Verdict.KILLED, Verdict.NAN, Verdict.CRASHED, Verdict.HUNG)


KILLED, NAN, CRASHED, HUNG = Verdict.KILLED, Verdict.NAN, Verdict.CRASHED, Verdict.HUNG
SURVIVED, NA, UNSUPPORTED, ERROR = Verdict.SURVIVED, Verdict.NA, Verdict.UNSUPPORTED, Verdict.ERROR
CAUGHT = tuple(v for v in Verdict if v.caught)
VERDICTS = tuple(Verdict)


@dataclass
class Evidence:
    """Why a detector flagged: the call, where it went wrong and how to see it again."""

    call: str  # "attention(Q (2, 4, 5) float64, K (2, 6, 5), V (2, 6, 7), mask (2, 1, 6) bool)"
    expected: str = ""
    actual: str = ""
    index: tuple | None = None
    case: str = ""  # battery case name
    snippet: str = ""  # a runnable reproduction
    # the smallest case found that still fails (attnzoo.shrink), where shrinking ran (check,
    # not the kill matrix): case, from, to, sizes, attempts, cap, and, when smaller than the
    # case, its message, call and snippet, or ``skipped`` saying why it could not shrink
    shrunk: dict | None = None
    # builds ``snippet`` when it is first wanted: a reproduction is checked line by line, which
    # for a large case costs seconds, and most failing cases of a detector never print one
    make: object = field(default=None, repr=False, compare=False)
    # ``scripted(about)``: the standalone reproduction (detectors.kit.script), with ``about``
    # as its opening comment lines; built only for the cases a diagnosis names
    scripted: object = field(default=None, repr=False, compare=False)

    def __getstate__(self):
        """Pickled (a finding sent from one process to another, as the kill matrix's are)
        without the script builder, which holds every array of the calls: a script is built
        in the process that found the case, or not at all."""
        return {**self.__dict__, "scripted": None}

    def resolve(self):
        """Fill in ``snippet`` if it was left to be built; the evidence, for chaining."""
        if self.make is not None and not self.snippet:
            self.snippet, self.make = self.make(), None
        return self

    def to_json(self):
        self.resolve()
        data = {
            "call": self.call,
            "case": self.case,
            "index": None if self.index is None else [int(i) for i in self.index],
            "expected": self.expected,
            "actual": self.actual,
            "snippet": self.snippet,
        }
        if self.shrunk is not None:  # only where shrinking ran: the kill matrix has none
            data["shrunk"] = dict(self.shrunk)
        return data


@dataclass
class Finding:
    """One detector's verdict on one implementation."""

    detector: str
    target: str
    verdict: str
    message: str = ""
    evidence: Evidence | None = None
    calls: int = 0
    seconds: float = 0.0  # wall time of the whole check
    impl_seconds: float = 0.0  # time spent inside the implementation's own calls
    notes: list = field(default_factory=list)
    unsupported: dict = field(default_factory=dict)  # case set aside -> why
    cases: dict = field(default_factory=dict)  # per-case outcomes of a flagged detector, if asked
    tiers: list = field(default_factory=list)  # a --budget run: the battery tiers it reached

    @property
    def caught(self):
        return Verdict(self.verdict).caught

    @classmethod
    def from_json(cls, data):
        ev = data.get("evidence")
        evidence = None
        if ev:
            index = None if ev["index"] is None else tuple(ev["index"])
            evidence = Evidence(ev["call"], ev["expected"], ev["actual"], index, ev["case"],
                                ev["snippet"], ev.get("shrunk"))
        return cls(data["detector"], data["target"], data["verdict"], data["message"], evidence,
                   data["calls"], data["seconds"], data["impl_seconds"], list(data["notes"]),
                   dict(data.get("unsupported", {})), dict(data.get("cases", {})),
                   list(data.get("tiers", ())))

    def to_json(self):
        return {
            "detector": self.detector,
            "target": self.target,
            "verdict": str(self.verdict),  # plain data: JSON, xdist
            "message": self.message,
            "evidence": None if self.evidence is None else self.evidence.to_json(),
            "calls": self.calls,
            "seconds": round(self.seconds, 6),
            "impl_seconds": round(self.impl_seconds, 6),
            "notes": list(self.notes),
            "unsupported": dict(self.unsupported),
            "cases": {k: v for k, v in self.cases.items() if k != "evidence"},  # JSON only
            **({"tiers": list(self.tiers)} if self.tiers else {}),
        }


class Flag(Exception):
    """A mismatch with its evidence attached: becomes a killed or nan verdict."""

    def __init__(self, mismatch, evidence):
        super().__init__(mismatch.text)
        self.text, self.verdict, self.evidence = mismatch.text, mismatch.verdict, evidence
        evidence.expected, evidence.actual = mismatch.expected, mismatch.actual


class ImplementationFailure(Exception):
    """The implementation raised, hung, died or returned a non-answer during a call.

    ``died``: its process ended during the call. ``earlier``: how many calls that process had
    answered before, when the same call answered alone in a fresh process (the death is then
    charged to what those calls left behind; 0 when it is not)."""

    def __init__(self, verdict, what, call, died=False):
        super().__init__(what)
        self.verdict = verdict
        self.what = what
        self.call = call if call is None else str(call)  # (a calls.Described is written now)
        self.died, self.earlier = died, 0

    def reword(self, what):
        self.what = what
        self.args = (what,)


class NotApplicable(Exception):
    """The implementation lacks a function or feature the detector needs."""


class Unsupported(Exception):
    """One case is outside what the target supports: declared, or refused at run time.

    ``case`` names it, so the runner can set it aside and run the detector on the rest."""

    def __init__(self, case, why):
        super().__init__(why)
        self.case, self.why = case, why


def envelope(detector, text, call):
    return f"[{detector}] {text} [{call}]"
