"""Grouped-query heads (V7): query head h reads key/value head h // (Hq/Hk), with every feature.

Metamorphic: a GQA or MQA call equals the same call with each key/value head repeated for the
query heads that share it (an MHA call), on cases that page the cache, window, cap and bias.
A mapping by h % Hk, or a group size taken from the wrong side, reads another head's keys.
"""

from detectors.kit import varlen

PROPERTY = ("A grouped-query call equals the call with each key/value head repeated for its "
            "query heads, whatever else the call uses.")
CLAUSES = ("V7",)
ORACLE = "metamorphic"


def check(subject):
    for case in subject.cases():
        Hq, Hk = case.heads
        if Hq == Hk:
            continue
        out, _ = subject.run(case)
        mha = varlen.repeated_heads(case)
        want, _ = subject.run(mha)
        subject.same(out, want, mha, relation="should equal the grouped call",
                     rows=varlen.owned(case))
