"""The pytest plugin inside each grading process: injects the fixtures, records every outcome.

``attnzoo grade`` starts one pytest per implementation with ``-p attnzoo.grade.fixtures`` and
``--attnzoo-grade=PATH``, a file with the spec (locator, contract, backend, record path, whether
it is a canary: :mod:`attnzoo.grade.canary`) read and deleted before the suite's conftest files
load, so no test learns from the arguments or that file which implementation it was given.
This plugin gives the user's tests ``attention`` (the lesson contract: an object with
``causal_mask``, ``softmax``, ``attention`` and ``causal_self_attention``) and ``sdpa`` (a
callable with ``F.scaled_dot_product_attention``'s signature), each a fresh instance per test so
that no test sees another's state, and writes one JSON line per event to the record file,
flushed at once: ``start`` before a test runs and ``done`` with its outcome after, so a process
that dies or hangs in a test leaves the name of that test behind. Nothing but these JSON lines
goes back.
"""

import json
import os

import pytest

OPTION = "--attnzoo-grade"
FIXTURES = ("attention", "sdpa")
TEXT_LIMIT = 6000  # characters of pytest's failure text kept per outcome


def pytest_addoption(parser):
    parser.addoption(OPTION, default=None, help="(internal to attnzoo grade) what to inject")


_SPEC = []  # the spec, once read


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Read the spec and delete its file, before any conftest of the suite is imported."""
    path = early_config.known_args_namespace.attnzoo_grade
    if path and not _SPEC:
        with open(path, encoding="utf-8") as f:
            _SPEC.append(json.load(f))
        os.unlink(path)


def pytest_configure(config):
    if _SPEC:
        config.pluginmanager.register(Recorder(_SPEC[0]), "attnzoo-grade-recorder")


class Recorder:
    def __init__(self, spec):
        self.spec = spec
        self.file = open(spec["record"], "a", encoding="utf-8", buffering=1)
        self.outcome = {}  # nodeid -> the outcome record being built
        self.implementation = None

    def write(self, **event):
        self.file.write(json.dumps(event, ensure_ascii=False) + "\n")
        self.file.flush()

    # -- collection ---------------------------------------------------------------------------

    def pytest_collectreport(self, report):
        if report.failed:
            self.write(event="collect-error", where=report.nodeid,
                       text=report.longreprtext[:TEXT_LIMIT])

    def pytest_collection_finish(self, session):
        for item in session.items:
            used = [f for f in FIXTURES if f in getattr(item, "fixturenames", ())]
            self.write(event="collected", test=item.nodeid, fixtures=used)

    # -- running ------------------------------------------------------------------------------

    def pytest_runtest_logstart(self, nodeid, location):
        self.outcome[nodeid] = {"outcome": "passed", "exception": "", "text": ""}
        self.write(event="start", test=nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        record = self.outcome.setdefault(item.nodeid, {"outcome": "passed", "exception": "",
                                                       "text": ""})
        if report.failed and record["outcome"] in ("passed", "skipped"):
            record["outcome"] = "failed" if call.when == "call" else "error"
            excinfo = call.excinfo
            record["exception"] = excinfo.typename if excinfo is not None else ""
            record["text"] = report.longreprtext[:TEXT_LIMIT]
        elif report.skipped and record["outcome"] == "passed":
            record["outcome"] = "skipped"
            longrepr = report.longrepr
            record["text"] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        return report

    def pytest_runtest_logfinish(self, nodeid, location):
        self.write(event="done", test=nodeid, **self.outcome.pop(nodeid, {"outcome": "error"}))

    # -- the fixtures' implementation -------------------------------------------------------------

    def fresh(self):
        """A new instance of the implementation: modules as they are, objects rebuilt; for a
        canary, the reference dressed as it."""
        from attnzoo.grade.canary import dressed
        from attnzoo.sandbox.target import load, renewed

        if self.implementation is None:
            self.implementation = load(self.spec["locator"])
        fresh = renewed(self.implementation)
        return dressed(fresh) if self.spec.get("canary") else fresh


def _recorder(request):
    recorder = request.config.pluginmanager.get_plugin("attnzoo-grade-recorder")
    if recorder is None:
        pytest.skip("run under 'attnzoo grade', which injects the implementation under test")
    return recorder


@pytest.fixture
def attention(request):
    """The implementation under test, lesson contract: missing functions skip the test."""
    recorder = _recorder(request)
    if recorder.spec["contract"] != "lesson":
        pytest.skip("this implementation follows the SDPA contract; the test asks for `attention`")
    return Lesson(recorder.fresh())


@pytest.fixture
def sdpa(request):
    """The implementation under test, F.scaled_dot_product_attention's signature."""
    recorder = _recorder(request)
    if recorder.spec["contract"] != "sdpa":
        pytest.skip("this implementation follows the lesson contract; the test asks for `sdpa`")
    return recorder.fresh()


class Lesson:
    """The lesson's four functions of one implementation; one it lacks skips the test asking."""

    FUNCTIONS = ("causal_mask", "softmax", "attention", "causal_self_attention")

    def __init__(self, obj):
        self._obj = obj

    def __getattr__(self, name):
        fn = getattr(self._obj, name, None)
        if name in self.FUNCTIONS and not callable(fn):
            pytest.skip(f"the implementation under test has no {name}")
        if fn is None:
            raise AttributeError(name)
        return fn

    def __repr__(self):  # what pytest prints beside a failing assertion: never the bug's name
        return "<attention under test>"
