"""The machinery behind the detectors: targets, calls, the case battery, verdicts, reports."""
