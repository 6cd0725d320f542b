"""Suites of typical tests, run like detectors, to show what thorough detectors add."""
