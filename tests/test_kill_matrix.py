"""Every zoo row × every detector: the kill matrix, one test per cell.

The cells this process runs are computed together first, rows spread over forked processes as
``attnzoo matrix`` spreads them (every cell is independent: a fresh implementation each, the
battery drawn from the seed), and each test then judges its own; a pytest-xdist worker, sent
cells one at a time, computes each in its test.

A cell fails when a bug survives a detector its metadata expects, when the reference or a decoy
is flagged by anything, when a bug that its page says shows only at a deeper tier than
``--kill-matrix-depth`` is caught all the same, or when a detector errs. Ids read
``bug-backend-detector``, so ``pytest -k causality`` runs one column and
``pytest -k mask-fill-zero`` one bug.
"""

import functools

import pytest

from attnzoo.cli import processors
from attnzoo.matrix import model as matrix
from attnzoo.matrix.plugin import PROPERTY
from attnzoo.runner import run
from detectors import all_detectors, baseline_suites
from zoo import DEPTHS

ROWS = matrix.rows()
BASELINES = {b.NAME for b in baseline_suites()}
CELLS = [(row, det) for row in ROWS for det in all_detectors() + baseline_suites()]


@functools.lru_cache(maxsize=None)
def _rows_at(depth):
    return {r.label: r for r in matrix.rows(depth)}


@pytest.fixture(scope="session")
def computed(request, battery):
    """(row label, detector) -> Finding of every cell collected for this process; {} in a
    pytest-xdist worker (which learns its cells one at a time) and under -x or --maxfail (a
    run that stops at its first failures computes no cell it will not reach)."""
    if hasattr(request.config, "workerinput") or request.config.option.maxfail:
        return {}
    wanted = {}
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item, "originalname", "") == "test_cell" and "row" in params:
            wanted.setdefault(params["row"].label, set()).add(params["detector"].NAME)
    return matrix.evaluate(battery.seed, select=lambda r: r.label in wanted,
                           depth=battery.depth, jobs=processors(), only=wanted).findings


@pytest.mark.parametrize("row, detector", CELLS, ids=[f"{r.label}-{d.NAME}" for r, d in CELLS])
def test_cell(row, detector, battery, computed, record_property):
    depth = battery.depth
    row = _rows_at(depth)[row.label]  # what this depth expects of the row
    finding = computed.get((row.label, detector.NAME)) or run(detector, matrix.subject_for(row),
                                                               battery)
    record_property(PROPERTY, {"row": row.label, "finding": finding.to_json()})
    kind = matrix.cell(row, detector.NAME, finding.verdict, detector.NAME in BASELINES)
    if kind == "miss":
        pytest.fail(f"{row.label} survived {detector.NAME}, which its metadata expects to "
                    f"catch it: {finding.message}", pytrace=False)
    if row.kind == "bug" and finding.caught and DEPTHS.index(row.depth) > DEPTHS.index(depth):
        pytest.fail(f"{row.label} is caught by {detector.NAME} at depth {depth}, though its "
                    f"page says it shows only at depth {row.depth}: {finding.message}",
                    pytrace=False)
    if kind == "false":
        pytest.fail(f"false alarm on the correct {row.label}: {finding.message}", pytrace=False)
    if kind == "error":
        pytest.fail(finding.message, pytrace=False)
