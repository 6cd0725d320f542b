"""A packed call equals each of its sequences run alone (V1).

Metamorphic: the target is compared with itself. A sequence's rows may depend only on its own
queries, keys and slopes; offsets that leak, a store that spills into the next sequence, or a
bound taken from the batch's longest sequence make the packed answer differ from the lone one.
"""

from detectors.kit import varlen

PROPERTY = "A packed batch gives, for every sequence, the rows that sequence gives when run alone."
CLAUSES = ("V1", "V2")
ORACLE = "metamorphic"


def check(subject):
    for case in subject.cases():
        if case.B < 2:
            continue
        packed, _ = subject.run(case)
        start = 0
        for b, sq in enumerate(case.lens_q):
            single = varlen.alone(case, b)
            out, _ = subject.run(single)
            subject.same(packed[start:start + sq], out, single,
                         relation="should equal the same sequence run alone")
            start += sq
