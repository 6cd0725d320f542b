"""The small kit detectors are written with. It imports numpy and ``reference`` only — never
the application that runs it.

Its public face, what a detector file imports, is :data:`FACE`: the comparisons that raise
evidence (``expect``), what a detector needs of a target (``needs``), the battery's calls and
specs, the allowed keys of a call, the positions a long case is probed at, seeded grids, the
lessons' numbers and calls, gradient tolerances and the verdicts' exceptions. A detector gets
everything else through the ``subject`` it is handed — its calls, ``subject.trial`` and
``subject.case``, ``subject.expected`` and ``subject.allowance`` — while the plumbing behind
it (the subject, its trials, outcomes and judge, precision measurement, requests, layouts,
reproductions, the deeper tiers) may change without touching a detector. The varlen contract's
detectors (``detectors/varlen/``) have their own harness, ``varlen``: its cases, subject and judge.
"""

FACE = ("expect", "needs", "battery", "specs", "allowed", "positions", "draw", "lessons",
        "lesson_calls", "tolerance", "verdict", "varlen")
