"""The small kit detectors are written with: the subject under test, the case battery, the
comparisons that raise evidence, derived tolerances, and the lessons' numbers. It imports
numpy and ``reference`` only — never the application that runs it."""
