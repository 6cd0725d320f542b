"""The LSE is the natural log of the normaliser, consistent with the output (V10): splitting a
sequence's keys in two and merging the halves by their LSEs gives the whole call's output and
LSE, and the LSE is (Hq, total_q) in float32 or wider.

Invariant: the merge ``L = logaddexp(l₁, l₂)``, ``o = e^{l₁−L} o₁ + e^{l₂−L} o₂`` holds for the
true natural-log normaliser only; an LSE in base 2, one computed before the cap, or one that is
+∞ for an empty half breaks it. Cases without causal, window or ALiBi (which depend on where
the keys are cut); a cap is kept, as it applies to each score alone.
"""

import torch

from detectors.kit import varlen

PROPERTY = ("Merging the outputs of the two halves of every sequence's keys by their LSEs gives "
            "the whole call's output and LSE.")
CLAUSES = ("V10",)
ORACLE = "invariant"


def check(subject):
    subject.require("lse")
    for case in subject.cases():
        a = case.args
        if a["causal"] or a["window_size"] != (-1, -1) or a.get("alibi_slopes") is not None:
            continue
        out, lse = subject.run(case, lse=True)
        if lse.dtype not in (torch.float32, torch.float64):
            raise varlen.VarlenMismatch(f"{case.name}: lse is {lse.dtype}, float32 or wider "
                                        "is due (V10)")
        first, second = varlen.halves(case)
        o1, l1 = subject.run(first, lse=True)
        o2, l2 = subject.run(second, lse=True)
        l1, l2 = l1.double(), l2.double()
        total = torch.logaddexp(l1, l2)  # (Hq, total_q)
        safe = torch.where(torch.isneginf(total), torch.zeros_like(total), total)
        w1, w2 = torch.exp(l1 - safe).T[..., None], torch.exp(l2 - safe).T[..., None]
        merged = w1 * o1.double() + w2 * o2.double()  # (total_q, Hq, Dv)
        rows = varlen.owned(case)
        subject.same(lse, total, case, "lse", relation="should equal logaddexp of the halves' "
                     "LSEs", rows=rows)
        subject.same(out, merged, case, relation="should equal the halves merged by their "
                     "LSEs", rows=rows)
