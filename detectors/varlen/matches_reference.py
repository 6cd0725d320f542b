"""Every case of the battery, output and LSE, agrees with the float64 reference.

The reference (reference/varlen.py) is itself judged by the plain-loop oracle in
tests/test_varlen_reference.py. This is the broadest relation and the least specific: the
detectors beside it say which property a disagreement breaks.
"""

from detectors.kit import varlen

PROPERTY = ("Output and LSE agree with the float64 varlen reference on every case, under the "
            "target's declared causal alignment.")
CLAUSES = ("V1", "V2", "V3", "V4", "V5", "V6", "V7", "V8", "V10", "V11", "V12")
ORACLE = "differential"


def check(subject):
    for case in subject.cases():
        out, lse = subject.run(case, lse=True)
        want, want_lse = subject.expected(case)
        rows = varlen.owned(case)
        subject.same(out, want, case, rows=rows)
        if lse is not None:  # None: the target declares the LSE unsupported
            subject.same(lse, want_lse, case, "lse", rows=rows)
