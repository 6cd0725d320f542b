"""Attention computes at the precision of its inputs.

Precision apart from semantics (C6). On plain cases (no mask, no causal, no scale, no grouped
heads, ordinary magnitudes) the error against exact attention is compared with what correct
code makes at the inputs' dtype and at each coarser format (detectors.kit.precision). A
library that computes softmax in float32 for float64 inputs, or casts to float16 "for speed"
and back, is reported here once — "float64 inputs computed to float32 accuracy" — while every
semantic relation is judged at the precision it was measured to have, so the other detectors
say only what is wrong beyond it. An error no format explains is a wrong answer, which the
semantic detectors judge; this detector does not claim it. A library that documents computing
float64 inputs in float32 declares it (``float64=computed-in-float32``): float32 accuracy is
then what it promised, and only a coarser one is a finding.
"""

from detectors.kit import expect
from detectors.kit.needs import ATTENTION
from detectors.kit.verdict import NotApplicable

PROPERTY = "Plain cases come back as accurate as correct code at the inputs' dtype computes them."
CLAUSES = ("C6",)
ORACLE = "differential"
NEEDS = ATTENTION
CAUSE = "dtype"  # a failure is a finding about the inputs' dtype, not about its cases


def check(subject, battery):
    """On the plain cases every relation's precision is measured on (the quick battery at
    seed 0, whatever the run's seed and depth): what is reported is what they are judged at,
    and a wrong answer whose error happens to be of a coarser format's size on some draws
    cannot make the verdict depend on the seed."""
    dtype = subject.dtype
    found = subject.judge.measure(lambda call: subject.attend(call, dtype=dtype), dtype)
    if found.effective is None and found.unlike:
        raise NotApplicable(
            f"the error on plain cases ({found.error:.3g} on {found.case}) looks like a "
            f"coarser format's rounding, but {found.unlike}: a wrong answer, not a precision, "
            "left to the semantic detectors")
    if found.effective is None:
        raise NotApplicable(
            f"the error on plain cases ({found.error:.3g} on {found.case}) is more than any "
            f"floating-point format explains ({dtype} allows {found.allows:.2g}, "
            f"{subject.judge.formats(dtype)[-1]} {found.cap:.2g}): a wrong answer, not a "
            "precision, left to the semantic detectors")
    declared = subject.computed_at(dtype)
    if found.coarser and subject.judge.formats(dtype).index(found.effective) <= \
            subject.judge.formats(dtype).index(declared):
        return  # as coarse as the library documents computing it, and no coarser
    if found.coarser:
        where = expect.at("out", found.index)
        with subject.case(found.case, found.answer):
            raise expect.Mismatch(
                f"{dtype} accuracy ({dtype} allows {found.allows:.2g})",
                f"{found.effective} accuracy: error {found.error:.2g}",
                found.index,
                text=f"{dtype} inputs computed to {found.effective} accuracy"
                     + (f" (declared: {declared})" if declared != dtype else "")
                     + f": error {found.error:.2g}, {dtype} allows {found.allows:.2g} ({where} = "
                     f"{expect.digits(found.got, found.want)}, exact "
                     f"{expect.digits(found.want, found.got)}, difference "
                     f"{found.got - found.want:.2g})")
