"""Detectors: each file states one property of correct attention and tests it by behaviour.

A detector module defines ``PROPERTY`` (one sentence), ``CLAUSES`` (the contract clauses of
:mod:`reference` it reads), ``ORACLE`` (the kind of oracle it uses) and ``check(subject, battery)``,
which returns when the property holds and raises a Flag with evidence when it does not.
Modules are discovered from this folder; the baselines (``detectors/baselines``) are suites of
typical tests kept apart, to show what they miss.
"""

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path

ORACLES = (
    "known-answer",
    "differential",
    "invariant",
    "metamorphic",
    "perturbation",
    "special-input",
    "side-effect",
    "gradient",
    "baseline",
)
_FIELDS = ("PROPERTY", "CLAUSES", "ORACLE", "check")


@lru_cache(maxsize=None)
def _load(package):
    folder = Path(__file__).parent / package if package else Path(__file__).parent
    prefix = f"detectors.{package}." if package else "detectors."
    found = []
    for info in pkgutil.iter_modules([str(folder)]):
        if info.ispkg or info.name.startswith("_"):
            continue
        module = importlib.import_module(prefix + info.name)
        missing = [f for f in _FIELDS if not hasattr(module, f)]
        if missing:
            raise ImportError(f"detector {module.__name__} lacks {', '.join(missing)}")
        if module.ORACLE not in ORACLES:
            raise ImportError(f"detector {module.__name__}: ORACLE must be one of {ORACLES}")
        module.NAME = info.name
        found.append(module)
    return tuple(sorted(found, key=lambda m: (ORACLES.index(m.ORACLE), m.NAME)))


def all_detectors():
    """The full suite, ordered by oracle kind."""
    return _load("")


def baseline_suites():
    """Typical test suites, run like detectors for comparison."""
    return _load("baselines")


def by_name():
    return {d.NAME: d for d in all_detectors() + baseline_suites()}
