"""The kill matrix as a pytest plugin: a terminal summary at the end of every run.

Each ``tests/test_kill_matrix.py`` cell records its finding as a user property; pytest-xdist
carries user properties from workers to the controller, so the matrix printed (and written with
``--kill-matrix-json PATH``) is the same for serial and parallel runs.

When the run computed the whole matrix at the committed seed, every cell is compared with
``docs/kill-matrix.json`` (the kind and the verdict, not the message text): a cell that differs
fails the session, listed, because the docs built from that file would then be out of date. A
``-k`` subset, or another ``--kill-matrix-seed``, is compared with nothing. Such a run's
summary line counts the changed cells (so it is not green while the exit code is 1), and the
last line it prints says what to run next: ``attnzoo docs``, also when a row has no catalogue
page yet (an entry just added).

Every pytest run of the project loads this plugin (``-p`` in pyproject.toml), one of the
reference's tests alone included: the matrix model, the detectors and the renderer are imported
when there are cells to summarise, not when the plugin loads.
"""

import json
from types import SimpleNamespace

import pytest

from detectors.kit.depths import DEPTHS

PROPERTY = "kill_matrix"
COMMITTED = "docs/kill-matrix.json"
CHANGED = "kill-matrix cells changed"  # the summary line's word for them: "3 kill-matrix …"


def pytest_addoption(parser):
    group = parser.getgroup("kill-matrix", "attention bug zoo kill matrix")
    group.addoption("--kill-matrix-json", metavar="PATH", default=None,
                    help="write the kill matrix of this run as JSON to PATH")
    group.addoption("--kill-matrix-seed", metavar="N", type=int, default=0,
                    help="seed of the case battery (verdicts must not depend on it)")
    group.addoption("--kill-matrix-depth", default="quick",
                    choices=DEPTHS,
                    help="battery tier of the kill matrix (default quick; bugs that show only "
                    "deeper are expected to survive it)")


def pytest_configure(config):
    config.pluginmanager.register(KillMatrixReport(config), "kill-matrix-report")


class KillMatrixReport:
    def __init__(self, config):
        self.config = config
        self.cells = {}  # (row label, detector) -> finding JSON
        self.drift = None  # [(row label, detector, committed, computed)] once compared

    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY:
                self.cells[(value["row"], value["finding"]["detector"])] = value["finding"]

    def matrix(self):
        from attnzoo.matrix.model import Matrix, rows  # deferred: see the module docstring
        from detectors import all_detectors, baseline_suites
        from detectors.kit.verdict import Finding

        seen = {label for label, _ in self.cells}
        chosen = [r for r in rows(self.config.getoption("kill_matrix_depth")) if r.label in seen]
        dets = [d.NAME for d in all_detectors() if any(d.NAME == k[1] for k in self.cells)]
        bases = [b.NAME for b in baseline_suites() if any(b.NAME == k[1] for k in self.cells)]
        m = Matrix(self.config.getoption("kill_matrix_seed"), dets, bases, chosen,
                   depth=self.config.getoption("kill_matrix_depth"))
        m.findings = {k: Finding.from_json(v) for k, v in self.cells.items()}
        return m

    def is_whole(self):
        """Did this run compute every cell of today's matrix?"""
        from attnzoo.matrix.model import rows  # deferred: see the module docstring
        from detectors import all_detectors, baseline_suites

        names = [d.NAME for d in all_detectors() + baseline_suites()]
        return set(self.cells) == {(r.label, d) for r in rows() for d in names}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        if not self.cells or hasattr(self.config, "workerinput"):
            return
        path = self.config.rootpath / COMMITTED
        if not path.exists() or not self.is_whole():
            return
        if self.config.getoption("kill_matrix_depth") != "quick":  # the committed one is quick
            return
        committed = json.loads(path.read_text(encoding="utf-8"))
        if committed.get("seed") != self.config.getoption("kill_matrix_seed"):
            return
        self.drift = compare(committed, self.matrix().to_json())
        if self.drift and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")  # None: -p no:terminal
        if self.drift and reporter is not None:  # counted in the summary line, not green
            reporter.stats.setdefault(CHANGED, []).extend(SimpleNamespace() for _ in self.drift)

    def next_step(self):
        """What to run next, or None: the docs are stale when cells changed or a row of the
        run has no catalogue page yet."""
        if not self.cells or hasattr(self.config, "workerinput"):
            return None
        from attnzoo.matrix.model import rows  # deferred: see the module docstring

        seen = {label for label, _ in self.cells}
        pages = self.config.rootpath / "docs" / "catalogue"
        new = sorted({r.id for r in rows() if r.label in seen and r.kind != "reference"
                      and pages.is_dir() and not (pages / f"{r.id}.md").exists()})
        if self.drift:
            return "next: run 'attnzoo docs' and commit docs/ (the kill matrix changed)"
        if new:
            return (f"next: run 'attnzoo docs' to write the catalogue page of {', '.join(new)}, "
                    "and commit docs/")
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        """The run's last line, below the summary: what to run next."""
        step = self.next_step()
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if step and reporter is not None:
            reporter.write_line(step, yellow=True, bold=True)

    def pytest_terminal_summary(self, terminalreporter):
        if not self.cells or hasattr(self.config, "workerinput"):
            return
        from attnzoo.matrix import render  # deferred: see the module docstring

        matrix = self.matrix()
        terminalreporter.section("kill matrix")
        for line in render.text(matrix, colour=terminalreporter.hasmarkup).splitlines():
            terminalreporter.write_line(line)
        if self.drift is not None:
            self.report_drift(terminalreporter)
        path = self.config.getoption("kill_matrix_json")
        if path:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(matrix.to_json(), f, indent=1, ensure_ascii=False)
            terminalreporter.write_line(f"kill matrix written to {path}")

    def report_drift(self, terminalreporter):
        n = len(self.drift)
        if not n:
            terminalreporter.write_line(f"every cell agrees with {COMMITTED}")
            return
        terminalreporter.write_line(f"{n} cell(s) differ from {COMMITTED} (committed -> this run); "
                                    "run 'attnzoo docs' and commit docs/:", red=True)
        for label, detector, was, now in self.drift:
            terminalreporter.write_line(f"  {label} × {detector}: {was} -> {now}", red=True)


def compare(committed, computed):
    """[(row, detector, committed, computed)] for every cell whose kind or verdict differs."""
    def cells(doc):
        return {(r["row"], d): f"{c['cell']} ({c['verdict']})"
                for r in doc["rows"] for d, c in r["cells"].items()}

    was, now = cells(committed), cells(computed)
    return [(label, d, was.get((label, d), "no cell"), now.get((label, d), "no cell"))
            for label, d in sorted(was.keys() | now.keys())
            if was.get((label, d)) != now.get((label, d))]
