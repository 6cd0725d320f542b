"""Where the pages of a paged cache lie in memory changes nothing (V2).

Metamorphic: the physical blocks are moved to new places with the block table following them,
and the same keys are also sent packed, without pages; all three calls must agree.
"""

from detectors.kit import varlen

PROPERTY = ("Moving the cache's physical blocks (the block table following) or packing the same "
            "keys without pages leaves the answer unchanged.")
CLAUSES = ("V2",)
ORACLE = "metamorphic"


def check(subject):
    for n, case in enumerate(c for c in subject.cases() if c.paged):
        out, _ = subject.run(case)
        rows = varlen.owned(case)
        for other in (varlen.permute_pages(case, subject.seed + n), varlen.unpaged(case)):
            moved, _ = subject.run(other)
            subject.same(moved, out, other, relation="should equal the call with the pages "
                         "where they were", rows=rows)
