"""Detectors: each file states one property of correct attention and tests it by behaviour.

A detector module defines ``PROPERTY`` (one sentence), ``CLAUSES`` (the contract clauses of
:mod:`reference` it reads), ``ORACLE`` (the kind of oracle it uses), ``NEEDS`` (what it needs of a
target, :mod:`detectors.kit.needs`; without it, a detector applies to every target) and
``check(subject, battery)``, which returns when the property holds and raises a mismatch inside
``subject.case(…)`` when it does not. A detector whose every failure is, by construction, a
finding about one feature of its cases declares it as ``CAUSE`` (today only ``"dtype"``: the
precision measured at a dtype, or the dtype that comes back); the diagnosis groups its failures
by that feature alone.
Modules are discovered from this folder, and from any folder named in the ``ATTNZOO_DETECTORS``
environment variable (``os.pathsep``-separated) — how you try a detector of your own without
touching the package. The baselines (``detectors/baselines``) are suites of typical tests kept
apart, to show what they miss.
"""

import importlib
import importlib.util
import os
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
        _validate(module, module.__name__)
        module.NAME = info.name
        found.append(module)
    return tuple(sorted(found, key=lambda m: (ORACLES.index(m.ORACLE), m.NAME)))


def _validate(module, name):
    missing = [f for f in _FIELDS if not hasattr(module, f)]
    if missing:
        raise ImportError(f"detector {name} lacks {', '.join(missing)}")
    if module.ORACLE not in ORACLES:
        raise ImportError(f"detector {name}: ORACLE must be one of {ORACLES}")


@lru_cache(maxsize=None)
def _extra(folders):
    """Detectors from folders outside the package (ATTNZOO_DETECTORS)."""
    found = []
    for folder in filter(None, folders.split(os.pathsep)):
        for path in sorted(Path(folder).glob("*.py")):
            if path.name.startswith("_"):
                continue
            spec = importlib.util.spec_from_file_location(f"attnzoo_detector_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _validate(module, str(path))
            module.NAME = path.stem
            found.append(module)
    return tuple(found)


def all_detectors():
    """The full suite, ordered by oracle kind (then any from ATTNZOO_DETECTORS)."""
    return _load("") + _extra(os.environ.get("ATTNZOO_DETECTORS", ""))


def baseline_suites():
    """Typical test suites, run like detectors for comparison."""
    return _load("baselines")


def varlen_detectors():
    """The varlen contract's detectors (``detectors/varlen/``), each ``check(subject)`` with a
    :class:`detectors.kit.varlen.Subject`; the SDPA suite above never runs them."""
    return _load("varlen")


def by_name():
    return {d.NAME: d for d in all_detectors() + baseline_suites()}
