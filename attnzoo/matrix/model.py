"""The kill matrix as data: every zoo row against every detector, computed, and JSON in and out.

Rows are the reference, the bugs and the decoys, one per backend they provide, in catalogue
order; columns are the detectors, grouped by oracle kind, then the two baseline suites. A cell
is a kind of ``attnzoo.vocabulary.CELLS``. Text and markdown are ``attnzoo.matrix.render``'s.
"""

import gc
import json
from dataclasses import dataclass, field

from attnzoo import catalogue
from attnzoo.runner import run
from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.target import Target
from attnzoo.vocabulary import CELLS, FAILURES
from detectors import all_detectors, baseline_suites
from detectors.kit.battery import Battery
from detectors.kit.depths import DEPTHS
from detectors.kit.subject import Subject
from detectors.kit.verdict import CAUGHT, CRASHED, ERROR, HUNG, NA, UNSUPPORTED


@dataclass(frozen=True)
class Row:
    kind: str  # "reference", "bug" or "decoy"
    id: str
    backend: str  # numpy, torch or sdpa
    locator: str
    category: str = ""
    expected: tuple = ()  # detectors the bug's metadata expects to catch it at this depth
    depth: str = "quick"  # the shallowest tier at which the bug shows (its Bug.depth)

    @property
    def label(self):
        return f"{self.id}-{self.backend}"

    def target(self, device="cpu"):
        contract, backend = catalogue.ROW_BACKENDS[self.backend]
        return Target(f"{self.id}/{self.backend}", self.locator, contract, backend, device=device)


def rows(depth="quick"):
    """Reference rows, then bugs by category, then decoys, with what ``depth`` expects.

    A bug that shows only at a deeper tier than ``depth`` is expected to survive everything.
    """

    def reached(bug):
        return DEPTHS.index(bug.depth) <= DEPTHS.index(depth)

    out = [Row("reference", "reference", b, loc) for b, loc in catalogue.REFERENCE_ROWS]
    for entry in catalogue.bugs():
        for backend in entry.backends:
            expected = tuple(entry.meta.caught_by) if reached(entry.meta) else ()
            out.append(Row("bug", entry.id, backend, entry.locator(backend), entry.meta.category,
                           expected, entry.meta.depth))
    for entry in catalogue.decoys():
        for backend in entry.backends:
            out.append(Row("decoy", entry.id, backend, entry.locator(backend)))
    return out


def cell(row, detector, verdict, baseline=False):
    """The cell kind for a verdict on a row."""
    if verdict == ERROR:
        return "error"
    if verdict in (NA, UNSUPPORTED):
        return "na"
    caught = verdict in CAUGHT
    if row.kind != "bug":
        return "false" if caught else "pass"
    if verdict in (CRASHED, HUNG):
        return "crash"
    expected = detector in row.expected
    if caught:
        return "hit" if expected else "bonus"
    return "miss" if expected and not baseline else "pass"


_SUBJECTS = {}


def subject_for(row, device="cpu", dtype="float64"):
    """An in-process subject for a row (the zoo is trusted code), on a new instance each time.

    A fresh instance per cell keeps every cell independent of which detectors ran before it
    on the same worker, so serial and parallel runs agree even for bugs that keep state.
    """
    key = (row, device, dtype)
    if key not in _SUBJECTS:
        target = row.target(device)
        _SUBJECTS[key] = Subject(target, InProcess(target), dtype)
    return _SUBJECTS[key].fresh()


@dataclass
class Matrix:
    seed: int
    detectors: list
    baselines: list
    rows: list
    findings: dict = field(default_factory=dict)  # (row label, detector) -> Finding
    depth: str = "quick"  # the battery tier every cell ran at

    def kind(self, row, detector):
        finding = self.findings.get((row.label, detector))
        if finding is None:
            return None
        return cell(row, detector, finding.verdict, detector in self.baselines)

    def failures(self):
        return [(r.label, d, self.findings[(r.label, d)].message)
                for r in self.rows for d in self.detectors + self.baselines
                if self.kind(r, d) in FAILURES]

    # -- summary ---------------------------------------------------------------------------

    def caught_by(self, row, names):
        return [d for d in names if (f := self.findings.get((row.label, d))) and f.caught]

    def summary(self):
        bug_rows = [r for r in self.rows if r.kind == "bug"]
        bugs = sorted({r.id for r in bug_rows})
        here = DEPTHS.index(self.depth)
        deeper = [r for r in bug_rows if DEPTHS.index(r.depth) > here]  # survive by design

        def suite(names):
            rows_caught = [r for r in bug_rows if self.caught_by(r, names)]
            ids = {r.id for r in rows_caught}
            return {"rows": len(rows_caught), "bugs": len(ids)}

        missed = [r.label for r in bug_rows
                  if r not in deeper and not self.caught_by(r, self.detectors)]

        single = [r.label for r in bug_rows if len(self.caught_by(r, self.detectors)) == 1]
        correct = [r for r in self.rows if r.kind != "bug"]
        return {
            "seed": self.seed,
            "depth": self.depth,
            "bug_rows": len(bug_rows),
            # rows of bugs that show only at a deeper tier (BUG.depth): not at this depth
            "deeper_rows": len(deeper),
            "missed_rows": missed,  # rows that show at this depth and no detector caught
            "bugs": len(bugs),
            "full_suite": suite(self.detectors),
            "baselines": {b: suite([b]) for b in self.baselines},
            "caught_by_one_detector": single,
            "correct_rows": len(correct),
            "false_alarms": sum(1 for r in correct for d in self.detectors + self.baselines
                                if self.kind(r, d) == "false"),
            "failures": len(self.failures()),
        }

    def to_json(self):
        return {
            "seed": self.seed,
            "detectors": self.detectors,
            "baselines": self.baselines,
            "symbols": {k.name: {"symbol": k.glyph, "meaning": k.meaning} for k in CELLS.values()},
            "rows": [
                {
                    "row": r.label, "kind": r.kind, "id": r.id, "backend": r.backend,
                    "category": r.category, "expected": list(r.expected),
                    "cells": {
                        d: {"cell": self.kind(r, d), **self.findings[(r.label, d)].to_json()}
                        for d in self.detectors + self.baselines
                        if (r.label, d) in self.findings
                    },
                }
                for r in self.rows
            ],
            "summary": self.summary(),
        }


def evaluate(seed=0, repeat=1, select=None, device="cpu", dtype="float64", progress=None,
             depth="quick", jobs=1, only=None, cell=None, snippets=True):
    """Run every detector and baseline on every row; ``select`` filters rows by label, and
    ``only`` (row label -> detector names) the cells of each row. ``progress(row)`` is told of
    each row done; ``cell(row, detector name)`` of each cell as it starts (one job only).
    Without ``snippets`` no caught cell's reproduction is written: only JSON shows them.

    ``jobs`` > 1 spreads the rows over that many forked processes. Every cell is already
    independent of the others (a fresh instance per cell, the battery drawn from the seed), so
    the matrix is the serial one cell for cell; only the order in which rows finish changes.
    """
    dets, bases = all_detectors(), baseline_suites()
    chosen = [r for r in rows(depth) if select is None or select(r)]
    matrix = Matrix(seed, [d.NAME for d in dets], [b.NAME for b in bases], chosen, depth=depth)
    # forked processes inherit it
    _RUN[:] = [Battery(seed, repeat, depth), device, dtype, only, snippets]
    # The battery, the catalogue and the imported libraries live as long as the run: moved out
    # of the collector's sight, they are not rescanned each time the calls' garbage triggers it
    gc.freeze()
    if jobs > 1 and len(chosen) > 1:
        import concurrent.futures
        import multiprocessing

        pool = concurrent.futures.ProcessPoolExecutor(
            min(jobs, len(chosen)), mp_context=multiprocessing.get_context("fork"))
        with pool:
            futures = {pool.submit(_row, row): row for row in sorted(chosen, key=_cost)}
            for done in concurrent.futures.as_completed(futures):
                matrix.findings.update(done.result())
                if progress:
                    progress(futures[done])
        return matrix
    for row in chosen:
        matrix.findings.update(_row(row, cell))
        if progress:
            progress(row)
    return matrix


def _cost(row):
    """The order rows are handed to the processes: the dearest kinds first (SDPA rows run the
    most detectors, decoys and the reference pass every case of them), so that the last rows
    to finish are short ones and no process waits long on another at the end."""
    return -(("numpy", "torch", "sdpa").index(row.backend) * 2 + (row.kind != "bug"))


_RUN = []  # the battery, device, dtype, cells and snippets of the evaluate call running


def _row(row, cell=None):
    """(row label, detector) -> Finding for every detector and baseline on one row."""
    battery, device, dtype, only, snippets = _RUN
    found = {}
    for detector in all_detectors() + baseline_suites():
        if only is None or detector.NAME in only.get(row.label, ()):
            if cell:
                cell(row, detector.NAME)
            found[(row.label, detector.NAME)] = run(detector, subject_for(row, device, dtype),
                                                    battery, snippet=snippets)
    return found


def from_json(data):
    """Rebuild the cell kinds from a matrix JSON (for comparisons between runs)."""
    return {(r["row"], d): c["cell"] for r in data["rows"] for d, c in r["cells"].items()}


def kinds(matrix):
    """(row label, detector) -> cell kind, for every cell."""
    return {(row.label, d): matrix.kind(row, d)
            for row in matrix.rows for d in matrix.detectors + matrix.baselines}


def seed_dependent(runs):
    """The cells whose kind differs between runs (``kinds`` of each), sorted."""
    return sorted(k for k in runs[0] if len({r[k] for r in runs}) > 1)


def columns(matrix):
    """(heading, name) per column: detectors numbered from 1, baselines lettered from A."""
    return [(str(i + 1), d) for i, d in enumerate(matrix.detectors)] + [
        (chr(ord("A") + i), b) for i, b in enumerate(matrix.baselines)
    ]


def dumps(matrix):
    return json.dumps(matrix.to_json(), indent=1, ensure_ascii=False)
