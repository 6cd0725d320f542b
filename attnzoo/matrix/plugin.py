"""The kill matrix as a pytest plugin: a terminal summary at the end of every run.

Each ``tests/test_kill_matrix.py`` cell records its finding as a user property; pytest-xdist
carries user properties from workers to the controller, so the matrix printed (and written with
``--kill-matrix-json PATH``) is the same for serial and parallel runs.
"""

import json

PROPERTY = "kill_matrix"


def pytest_addoption(parser):
    group = parser.getgroup("kill-matrix", "attention bug zoo kill matrix")
    group.addoption("--kill-matrix-json", metavar="PATH", default=None,
                    help="write the kill matrix of this run as JSON to PATH")
    group.addoption("--kill-matrix-seed", metavar="N", type=int, default=0,
                    help="seed of the case battery (verdicts must not depend on it)")
    group.addoption("--kill-matrix-depth", default="quick",
                    choices=("quick", "standard", "deep"),
                    help="battery tier of the kill matrix (default quick; bugs that show only "
                    "deeper are expected to survive it)")


def pytest_configure(config):
    config.pluginmanager.register(KillMatrixReport(config), "kill-matrix-report")


class KillMatrixReport:
    def __init__(self, config):
        self.config = config
        self.cells = {}  # (row label, detector) -> finding JSON

    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY:
                self.cells[(value["row"], value["finding"]["detector"])] = value["finding"]

    def matrix(self):
        from attnzoo.matrix.model import Matrix, rows
        from detectors.kit.verdict import Finding
        from detectors import all_detectors, baseline_suites

        seen = {label for label, _ in self.cells}
        chosen = [r for r in rows(self.config.getoption("kill_matrix_depth")) if r.label in seen]
        dets = [d.NAME for d in all_detectors() if any(d.NAME == k[1] for k in self.cells)]
        bases = [b.NAME for b in baseline_suites() if any(b.NAME == k[1] for k in self.cells)]
        m = Matrix(self.config.getoption("kill_matrix_seed"), dets, bases, chosen)
        m.findings = {k: Finding.from_json(v) for k, v in self.cells.items()}
        return m

    def pytest_terminal_summary(self, terminalreporter):
        if not self.cells or hasattr(self.config, "workerinput"):
            return
        matrix = self.matrix()
        terminalreporter.section("kill matrix")
        for line in matrix.render_text().splitlines():
            terminalreporter.write_line(line)
        path = self.config.getoption("kill_matrix_json")
        if path:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(matrix.to_json(), f, indent=1, ensure_ascii=False)
            terminalreporter.write_line(f"kill matrix written to {path}")
