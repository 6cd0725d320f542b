"""Softcap's limit and its place: a cap far above every score is no cap, a cap bends the scores
before the ALiBi bias and the mask, and stays finite however large the logits (V5).

Metamorphic for the limit (cap = 10⁶ × the largest score against no cap); differential against
the float64 reference for the order (cases with the cap and ALiBi, window or causal) and for
logits past exp's range, where a tanh written as (e^{2x} − 1)/(e^{2x} + 1) gives ∞/∞.
"""

from detectors.kit import varlen

PROPERTY = ("A cap far above every score equals no cap; the cap applies before bias and mask and "
            "stays finite on any logits.")
CLAUSES = ("V5", "V6")
ORACLE = "metamorphic"


def check(subject):
    capped = [c for c in subject.cases() if c.args["softcap"] > 0]
    for case in capped:
        plain, _ = subject.run(case.with_(case.name + " (no cap)", softcap=0.0))
        far = case.with_(case.name + " (cap far above every score)",
                         softcap=1e6 * max(varlen.max_score(case), 1.0))
        out, _ = subject.run(far)
        subject.same(out, plain, far, relation="should equal the call without a cap",
                     rows=varlen.owned(case))
    for case in capped:
        out, _ = subject.run(case)
        want, _ = subject.expected(case)
        subject.same(out, want, case, relation="should equal the reference (cap, then bias, "
                     "then mask)", rows=varlen.owned(case))
