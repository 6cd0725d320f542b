"""The target's effective precision, measured once per dtype, apart from its semantics.

A library that computes softmax in float32 whatever it is given is off by 1e-7 at float64,
where correct code is off by 1e-16: every relation judged at float64's allowance would flag it,
each blaming its own property. So precision is measured on its own: on a few *plain* cases (no
mask, no causal, no scale, no grouped heads, ordinary magnitudes, where a semantic bug has
nowhere to hide behind rounding) the error against exact attention is compared with the strict
allowance (detectors.kit.tolerance) of each floating-point format, finest first. The finest
format whose allowance covers the error on every plain case is the precision the target
computes at; semantic relations are then judged at that format's allowance, and
``computes_at_input_precision`` reports the difference once.

The cap: no format coarser than bfloat16 (8 significant bits, the coarsest any attention
kernel computes in) is ever assumed. An error on plain cases that even bfloat16's allowance
does not explain is not imprecision but a wrong answer: nothing is widened, and every relation
is judged at the inputs' own precision, so gross error still fails.
"""

import functools
from dataclasses import dataclass

import numpy as np

from detectors.kit.verdict import ImplementationFailure, NotApplicable, Unsupported
from reference import FLOAT_DTYPES

FORMATS = FLOAT_DTYPES  # finest first; bfloat16 is the cap
PLAIN_CASES = 3  # the smallest plain cases the target supports


@dataclass
class Precision:
    """What a measurement found for inputs of ``dtype``."""

    dtype: str  # of the inputs
    effective: str | None  # finest format explaining the error on every plain case; None: none
    error: float = 0.0  # the largest error on the plain cases
    allows: float = 0.0  # what ``dtype`` allows on the case with that error
    case: str = ""  # the plain case with the largest error relative to its allowance
    answer: object = None  # that case's answer (its requests are the evidence)
    index: tuple | None = None  # the entry with the largest error
    got: float = 0.0
    want: float = 0.0
    cap: float = 0.0  # what the coarsest format (the cap) allows on that case

    @property
    def measured(self):
        return bool(self.case)

    @property
    def coarser(self):
        """Is the target measured to compute these inputs less precisely than they are?"""
        return self.effective is not None and self.effective != self.dtype


def formats(subject, dtype):
    """``dtype`` and the coarser formats it may be computed at (NumPy has no bfloat16)."""
    coarser = FORMATS[FORMATS.index(dtype):]
    return tuple(f for f in coarser if f != "bfloat16" or subject.backend == "torch")


def plain(spec):
    return (spec.mask is None and spec.bias is None and not spec.causal and spec.scale is None
            and not spec.gqa and spec.logits == 1.0 and spec.key_logits == 1.0
            and not spec.strided and not spec.head_logits)


def plain_cases(subject, battery):
    """The smallest plain attention cases the target can make and declares it supports."""
    if subject.contract == "lesson" and subject.manifest.lacks("attention"):
        return []  # a lesson module without attention: nothing plain to measure
    found = [c for c in battery.attention
             if plain(c.spec) and subject.supports(c) and subject.outside(c) is None]
    return sorted(found, key=lambda c: c.size())[:PLAIN_CASES]


def judge(subject, call, answer, dtype):
    """(the finest format whose strict allowance covers this answer's error, the error, what
    ``dtype`` allows, the worst index, what the cap allows); the format is None when none does."""
    from detectors.kit.tolerance import strict_allowance

    want = call.expected(subject.target.causal_alignment)[0]
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.asarray(answer.out, dtype=np.float64) - want)  # (..., L, Ev)
    allows = strict_allowance(subject, call, want, dtype)
    if diff.shape != want.shape or not np.isfinite(diff).all():
        return None, float("inf"), allows, None, allows
    error = float(diff.max(initial=0.0))
    index = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
    allowed = allows
    for f in formats(subject, dtype):
        allowed = allows if f == dtype else strict_allowance(subject, call, want, f)
        if error <= allowed:
            return f, error, allows, index, allowed
    return None, error, allows, index, allowed


def measure(subject, dtype):
    """The subject's precision at ``dtype``, measured once and kept on the subject.

    The plain calls go to a spare executor (a new instance in process, the same worker in the
    sandbox) through a subject of their own, so the detector that happens to ask first keeps
    its own call count, cases set aside and history."""
    from detectors.kit.subject import Subject

    cache = subject.__dict__.setdefault("_precision", {})
    if dtype not in cache:
        spare = getattr(subject.executor, "spare", lambda: subject.executor)()
        probe = Subject(subject.target, spare, dtype)
        cache[dtype] = on(subject, lambda call: _attend(probe, call, dtype), dtype)
    return cache[dtype]


def on(subject, attend, dtype, battery=None):
    """The precision found on the plain cases of ``battery`` (the quick one at seed 0 by
    default), each answered by ``attend(call)`` (None: no answer to measure)."""
    found, worst, ratio = [], Precision(dtype, dtype), -1.0
    for call in plain_cases(subject, battery or _battery()):
        answer = attend(call)
        if answer is FAILED:
            break  # a target that crashes or hangs is the detectors' to report, on their calls
        if answer is None:
            continue
        fmt, error, allows, index, cap = judge(subject, call, answer, dtype)
        found.append(fmt)
        if error / allows > ratio:
            ratio = error / allows
            want = call.expected(subject.target.causal_alignment)[0]
            got = float(np.asarray(answer.out)[index]) if index else float("nan")
            worst = Precision(dtype, None, error, allows, call.name, answer, index, got,
                              float(want[index]) if index else float("nan"), cap)
    if None in found:
        worst.effective = None  # no format explains it: a wrong answer, judged strictly
    else:  # the coarsest format any case needed; with nothing to measure, the inputs' own
        worst.effective = max(found, key=FORMATS.index) if found else dtype
    return worst


@functools.lru_cache(maxsize=1)
def _battery():
    """The quick battery at seed 0, drawn once: its plain cases are the same for every run,
    so the reference's errors on them are computed once too."""
    from detectors.kit.battery import Battery

    return Battery(0, depth="quick")


FAILED = object()  # the target raised, hung or died on a plain call: measure no further


def _attend(probe, call, dtype):
    """The probe's answer to a plain call, None when the call is refused or not applicable,
    FAILED when the target fails on it (a crash is the detectors' to find on their own calls,
    and one hang is enough to spend on a measurement)."""
    for _ in range(2):  # a refused E != Ev call is retried once as its E == Ev twin
        try:
            return probe.attend(call, dtype=dtype)
        except Unsupported as u:
            if u.case is not None:
                return None
        except ImplementationFailure:
            return FAILED
        except NotApplicable:
            return None
    return None


def effective(subject, dtype):
    """The format relations at ``dtype`` are judged at: the measured one, or ``dtype`` itself
    when the measurement found no floating-point format explains the error (the cap)."""
    found = measure(subject, dtype)
    return found.effective or dtype
