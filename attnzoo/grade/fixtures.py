"""The pytest plugin inside each grading process: injects the fixtures, records every outcome.

``attnzoo grade`` starts one pytest per implementation with ``-p attnzoo.grade.fixtures``; the
arguments and the environment are the same for every row. What the run is for (the contract,
the backend, which functions the implementation has) arrives as the first message on a socket
the process inherits (:data:`attnzoo.sandbox.child.inherited`), read before the suite's
conftest files load; with it come the record file (a descriptor opened for appending: a
confined run can open no file outside its scratch) and, for a graded run, a socket: the
connection to the implementation, which runs in a worker of its own
(:mod:`attnzoo.sandbox.relay`). Nothing in this process names the implementation: no locator,
no module, no canary flag (:mod:`attnzoo.grade.canary` dresses it in the worker).

This plugin gives the user's tests ``attention`` (the lesson contract: an object with
``causal_mask``, ``softmax``, ``attention`` and ``causal_self_attention``), ``sdpa`` (a
callable with ``F.scaled_dot_product_attention``'s signature) and ``varlen`` (a callable with
flash-attention's ``attn_varlen`` signature, docs/varlen.md), proxies of
:mod:`attnzoo.grade.proxy`, each on a fresh instance per test so that no test sees another's
state, and writes one JSON line per event to the record file, flushed at once: ``start`` before
a test runs and ``done`` with its outcome after, so a process that dies or hangs in a test
leaves the name of that test behind. A test during which the implementation's worker became
unreachable (the test killed it, or closed its connection) is recorded ``died``, and the
process ends there, so that the next test starts with a new worker instead of inheriting a
dead one. Nothing but these JSON lines goes back.
"""

import json
import os
import socket

import pytest

from attnzoo.grade import proxy

FIXTURES = ("attention", "sdpa", "varlen")
TEXT_LIMIT = 6000  # characters of pytest's failure text kept per outcome
LOST = 70  # exit code of a run whose implementation became unreachable during a test
SPEC_BYTES = 1 << 16

_SPEC = []  # the spec, once read ("relay": the descriptor of the connection to the worker)


def _read_spec():
    """The first message on the inherited socket, and the relay socket it carries."""
    from attnzoo.sandbox import child

    fd, child.inherited = child.inherited, None
    if fd is None:
        return None
    channel = socket.socket(fileno=fd)
    try:
        message, fds, _, _ = socket.recv_fds(channel, SPEC_BYTES, 2)
    finally:
        channel.close()
    spec = json.loads(message or b"{}")
    spec["record"], spec["relay"] = (list(fds) + [None, None])[:2]  # descriptors: a confined
    return spec                                                    # run opens no path


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Read the spec, before any conftest of the suite is imported."""
    if not _SPEC:
        spec = _read_spec()
        if spec is not None:
            _SPEC.append(spec)


def pytest_configure(config):
    if _SPEC:
        config.pluginmanager.register(Recorder(_SPEC[0]), "attnzoo-grade-recorder")


class Recorder:
    def __init__(self, spec):
        self.contract = spec.get("contract")
        self.file = open(spec["record"], "a", encoding="utf-8", buffering=1)
        self.outcome = {}  # nodeid -> the outcome record being built
        self.connection = None
        if spec.get("relay") is not None:
            from attnzoo.grade.proxy import connect

            self.connection = connect(spec["relay"], spec.get("functions") or (),
                                      spec.get("backend"))

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
        outcome = self.outcome.pop(nodeid, {"outcome": "error"})
        lost = (self.connection is not None and self.connection.used()
                and not self.connection.alive())
        if lost:
            outcome = {"outcome": "died", "exception": "", "text":
                       "the implementation under test became unreachable during this test "
                       "(its worker was killed or its connection closed); the tests after it "
                       "ran with a new one"}
        self.write(event="done", test=nodeid, **outcome)
        if lost:
            self.file.close()
            os._exit(LOST)

    # -- the fixtures' implementation -------------------------------------------------------------

    def fresh(self):
        """The connection, to a new instance of the implementation (made in its worker:
        modules as they are, objects rebuilt; for a canary, the reference dressed as it)."""
        self.connection.fresh()
        return self.connection


def _recorder(request):
    recorder = request.config.pluginmanager.get_plugin("attnzoo-grade-recorder")
    if recorder is None or recorder.connection is None:
        pytest.skip("run under 'attnzoo grade', which injects the implementation under test")
    return recorder


@pytest.fixture
def attention(request):
    """The implementation under test, lesson contract: missing functions skip the test."""
    recorder = _recorder(request)
    if recorder.contract != "lesson":
        pytest.skip(f"this implementation follows the {recorder.contract} contract; the test "
                    "asks for `attention`")
    return proxy.Lesson(recorder.fresh())


@pytest.fixture
def sdpa(request):
    """The implementation under test, F.scaled_dot_product_attention's signature."""
    recorder = _recorder(request)
    if recorder.contract != "sdpa":
        pytest.skip(f"this implementation follows the {recorder.contract} contract; the test "
                    "asks for `sdpa`")
    return proxy.Callable(recorder.fresh())


@pytest.fixture
def varlen(request):
    """The implementation under test, flash-attention's attn_varlen signature (docs/varlen.md)."""
    recorder = _recorder(request)
    if recorder.contract != "varlen":
        pytest.skip(f"this implementation follows the {recorder.contract} contract; the test "
                    "asks for `varlen`")
    return proxy.Varlen(recorder.fresh())


Lesson = proxy.Lesson  # what the `attention` fixture hands a test
