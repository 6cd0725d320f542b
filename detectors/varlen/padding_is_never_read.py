"""Padding is never read and no input is written: NaN in every element no sequence owns leaves
the answer unchanged (V2, V9).

Perturbation: keys and values allocated but past seqused_k, slots past a sequence's last key in
its last page, pages nobody uses and rows of q past cu_seqlens_q[-1] are filled with NaN, so a
read shows as NaN (or as a different number where a kernel masks scores but not values). The
call must also leave q, k, v, the offsets and the block table as they were.
"""

from detectors.kit import varlen

PROPERTY = ("NaN in padding (unused keys, unused page slots, guard rows of q) does not change the "
            "owned rows, and the call writes none of its inputs.")
CLAUSES = ("V2", "V9")
ORACLE = "perturbation"


def check(subject):
    for case in subject.cases():
        out, _ = subject.run(case, inputs_untouched=True)
        poisoned = varlen.poisoned(case)
        got, _ = subject.run(poisoned, inputs_untouched=True)
        subject.same(got, out, poisoned, relation="should equal the call with finite padding",
                     rows=varlen.owned(case))
