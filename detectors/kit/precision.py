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

from detectors.kit.battery import Battery, Call
from detectors.kit.specs import Spec
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
    unlike: str = ""  # why an error of a coarser format's size is not rounding, if it is not

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
            and spec.layout == "contiguous" and not spec.shared and not spec.head_logits)


def plain_cases(subject, battery):
    """The smallest plain attention cases the target can make and declares it supports."""
    if subject.contract == "lesson" and subject.manifest.lacks("attention"):
        return []  # a lesson module without attention: nothing plain to measure
    found = [c for c in battery.attention
             if plain(c.spec) and subject.supports(c) and subject.outside(c) is None]
    return sorted(found, key=lambda c: c.size())[:PLAIN_CASES]


def explains(subject, call, answer, dtype):
    """(the finest format whose strict allowance covers this answer's error, the error, what
    ``dtype`` allows, the worst index, what the cap allows); the format is None when none does."""
    want = subject.expected(call)[0]
    allows = subject.strict_allowance(call, want, dtype)
    if np.shape(answer.out) != want.shape:
        return None, float("inf"), allows, None, allows
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.asarray(answer.out, dtype=np.float64) - want)  # (..., L, Ev)
    if not np.isfinite(diff).all():
        return None, float("inf"), allows, None, allows
    error = float(diff.max(initial=0.0))
    index = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
    allowed = allows
    for f in formats(subject, dtype):
        allowed = allows if f == dtype else subject.strict_allowance(call, want, f)
        if error <= allowed:
            return f, error, allows, index, allowed
    return None, error, allows, index, allowed


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
        fmt, error, allows, index, cap = explains(subject, call, answer, dtype)
        found.append(fmt)
        if error / allows > ratio:
            ratio = error / allows
            want = subject.expected(call)[0]
            got = float(np.asarray(answer.out)[index]) if index else float("nan")
            worst = Precision(dtype, None, error, allows, call.name, answer, index, got,
                              float(want[index]) if index else float("nan"), cap)
    if None in found:
        worst.effective = None  # no format explains it: a wrong answer, judged strictly
    else:  # the coarsest format any case needed; with nothing to measure, the inputs' own
        worst.effective = max(found, key=FORMATS.index) if found else dtype
    if worst.coarser:
        worst.unlike = unlike_rounding(subject, attend, dtype, worst.effective)
        if worst.unlike:
            worst.effective = None  # its error is not rounding's: a wrong answer
    return worst


def rounding_probes():
    """Calls whose every input and every score is exact in every format down to bfloat16,
    with large scores a unit apart: ``s = 100 + j`` for key j. Computed in any format, the
    softmax of such scores errs only by that format's rounding of exp (a gap of 1 is exact);
    an answer that is further off is not rounding but a wrong answer that only looked like
    it at ordinary logits (a soft-cap, a clamp, a shift that is not the row's max)."""
    probes = []
    for name, lead in (("rounding probe", (1, 2)), ("rounding probe, one head", (1, 1))):
        H = lead[-1]
        q = np.zeros(lead + (4, 4))  # (1, H, L=4, E=4): query i reads coordinate i
        for i in range(4):
            q[..., i, i] = 16.0
        k = np.zeros(lead + (8, 4))  # (1, H, S=8, E=4): k[j, e] = 12.5 + j/8 + e/8
        k[...] = 12.5 + np.arange(8)[:, None] / 8 + np.arange(4)[None, :] / 8
        k[..., 1::2, :] *= -1 if H == 1 else 1  # the single head mixes signs: scores ±100
        v = (np.arange(8 * 4).reshape(8, 4) % 7 - 3) / 4 * np.ones(lead + (1, 1))
        spec = Spec(name, q.shape, k.shape, v.shape)
        probes.append(Call(spec, q, k, v, name=name))
    return probes


def unlike_rounding(subject, attend, dtype, effective):
    """Why an error that ``effective``'s rounding explains on plain cases is not rounding
    (the rounding probes, judged at ``effective``), or "" when it behaves like rounding."""
    for call in rounding_probes():
        if not subject.supports(call) or subject.outside(call):
            continue
        answer = attend(call)
        if answer is None or answer is FAILED:
            continue
        want = subject.expected(call)[0]
        allows = subject.strict_allowance(call, want, effective)
        if np.shape(answer.out) != want.shape:
            return f"{call.name}: an answer of shape {np.shape(answer.out)}"
        with np.errstate(invalid="ignore"):
            error = float(np.nanmax(np.abs(np.asarray(answer.out, dtype=np.float64) - want),
                                    initial=np.inf if not np.isfinite(answer.out).all()
                                    else 0.0))
        if not error <= allows:
            return (f"on {call.name} (scores 100 apart by 1, exact in {effective}) the error "
                    f"is {error:.2g}, where {effective} rounding allows {allows:.2g}")
    return ""


@functools.lru_cache(maxsize=1)
def _battery():
    """The quick battery at seed 0, drawn once: its plain cases are the same for every run,
    so the reference's errors on them are computed once too."""
    return Battery(0, depth="quick")


FAILED = object()  # the target raised, hung or died on a plain call: measure no further


def attend(probe, call, dtype):
    """The probe's answer to a plain call, None when the call is refused or not applicable,
    FAILED when the target fails on it (a crash is the detectors' to find on their own calls,
    and one hang is enough to spend on a measurement)."""
    try:
        return probe.attend(call, dtype=dtype)
    except (Unsupported, NotApplicable):
        return None
    except ImplementationFailure:
        return FAILED
