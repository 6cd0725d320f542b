"""The varlen contract's detectors: each file states one property of correct packed, paged
attention (clauses V1–V12) and tests it through behaviour, with ``check(subject)`` on a
:class:`detectors.kit.varlen.Subject`. ``detectors.varlen_detectors()`` discovers them; the
SDPA suite (``detectors.all_detectors()``) skips this package."""
