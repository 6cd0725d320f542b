"""Every zoo row × every detector: the kill matrix, one test per cell.

A cell fails when a bug survives a detector its metadata expects, when the reference or a decoy
is flagged by anything, when a bug that its page says shows only at a deeper tier than
``--kill-matrix-depth`` is caught all the same, or when a detector errs. Ids read
``bug-backend-detector``, so ``pytest -k causality`` runs one column and
``pytest -k mask-fill-zero`` one bug.
"""

import functools

import pytest

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


@pytest.mark.parametrize("row, detector", CELLS, ids=[f"{r.label}-{d.NAME}" for r, d in CELLS])
def test_cell(row, detector, battery, record_property):
    depth = battery.depth
    row = _rows_at(depth)[row.label]  # what this depth expects of the row
    finding = run(detector, matrix.subject_for(row), battery)
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
