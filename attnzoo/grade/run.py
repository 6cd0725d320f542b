"""Run a user's pytest suite against one implementation, in its own time-limited process.

The suite is untrusted code, and never holds the implementation: each run starts the
implementation in a worker of its own (forked, confined to the grade's isolation, and turned
into a relay: :mod:`attnzoo.sandbox.relay`) and hands the run only a connection to it, which the
fixtures wrap in a proxy (:mod:`attnzoo.grade.proxy`). The run's spec (the contract, the
backend, the record path, the functions the implementation has, and that connection) is the
first message on a socket the run inherits, with the record file it appends its outcomes to
(a descriptor: a confined run opens no file outside its scratch); its arguments and
environment are the same for every row. The run, the one that collects included, is confined
to the grade's isolation as a worker is (:mod:`attnzoo.sandbox.confine`: under strict it
writes only to a scratch of its own, its TMPDIR and HOME, has no network and no terminal), and
is scoped where the kernel has Landlock ABI 6: it can signal, ptrace or reach by abstract
socket nothing outside its own processes, so a test that kills the worker server, the
implementation's worker or another row's run gets EPERM, and only its own verdict changes;
where the kernel lacks it, :func:`unscoped` says why. Each run counts among the live
processes of :mod:`attnzoo.sandbox.hygiene`, so it and everything it started (a daemon that
double-forked included) are killed when it ends and on every exit path of the grade.

Each run is its own ``pytest`` process (forked by
:mod:`attnzoo.sandbox.zygote` from the server that has torch imported already, the one check's
workers come from: it has no address, so a suite cannot ask it for a process of its own) with
the grading plugin
(:mod:`attnzoo.grade.fixtures`), an empty ini file (the user's repository configuration and
``PYTEST_ADDOPTS`` stay out) and no plugin autoloading (a grade must not depend on what else is
installed). The only thing read back is the plugin's record file of JSON lines, each checked
against the tests that were asked for. A watchdog reads the record as it grows: a test that runs
past the time limit is killed and marked ``hung``; a test during which the process dies (a
segfault, ``os._exit``) is marked ``died``; then a new process runs the tests not yet run.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from attnzoo.inert import inert
from attnzoo.options import CALL_SECONDS
from attnzoo.sandbox import hygiene, wire, zygote

# what every graded run imports, ready in the server before the first fork
zygote.preload("pytest", "_pytest.python", "_pytest.assertion.rewrite", "attnzoo.grade.fixtures",
               "attnzoo.grade.proxy", "attnzoo.sandbox.relay", "attnzoo.grade.canary",
               "reference", "zoo")

TEST_SECONDS = CALL_SECONDS  # per test: to a grade, one test is one call of the code under test
START_SECONDS = 60.0  # from the process' start to its first test: imports, torch included
POLL = 0.05
TEXT = 6000  # characters of a test's failure text kept, as the grading plugin keeps them
FIXTURES = ("attention", "sdpa", "varlen")  # what the grading plugin injects
OUTCOMES = ("passed", "failed", "error", "skipped", "hung", "died")
CAUGHT = ("failed", "error", "hung", "died")


@dataclass
class Outcome:
    outcome: str  # one of OUTCOMES
    exception: str = ""  # the exception's type name for failed/error
    text: str = ""  # pytest's failure text, or why it was skipped, hung or died

    @property
    def caught(self):
        return self.outcome in CAUGHT

    @property
    def assertion(self):
        """Failed on an assertion (np.testing's included), not on an exception or a crash."""
        return self.outcome == "failed" and self.exception == "AssertionError"

    def to_json(self):
        return {"outcome": self.outcome, "exception": self.exception, "text": self.text}


class SuiteError(Exception):
    """The suite cannot be graded at all (it does not collect): one line, exit 2."""


@dataclass
class Suite:
    """Where a suite lives and how pytest is started on it."""

    path: Path  # a file or a folder
    root: Path = field(init=False)

    def __post_init__(self):
        self.path = Path(self.path).resolve()
        self.root = self.path if self.path.is_dir() else self.path.parent

    def command(self, tmp, args):
        """The pytest command line: the same for every row (the spec comes on the inherited
        socket, never here)."""
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n", encoding="utf-8")
        return [sys.executable, "-m", "pytest", "-c", str(ini), f"--rootdir={self.root}",
                f"--confcutdir={self.root}", "-p", "no:cacheprovider", "-p",
                "attnzoo.grade.fixtures", "-q", "--tb=short", "-o",
                "console_output_style=classic", *args]

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTEST_") and k != "ATTNZOO_DETECTORS"}
        env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1",
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        return env


def collect(suite, isolation=None):
    """The suite's tests, each with the fixtures of attnzoo it asks for; SuiteError if broken.
    Collecting imports the suite: its run is confined as a graded run is."""
    with tempfile.TemporaryDirectory(prefix="attnzoo-grade-") as tmp:
        spec = {"record": os.path.join(tmp, "collect.jsonl"), "contract": "none"}
        proc, output = _spawn(suite, spec, ["--collect-only", str(suite.path)], tmp, isolation)
        try:
            code = proc.wait(timeout=START_SECONDS)
            _reap(proc)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise SuiteError(f"{inert(suite.path)}: collecting its tests took over "
                             f"{START_SECONDS:g} s: does a module hang on import?") from None
        events = _read(spec["record"])
    errors = [e for e in events if e.get("event") == "collect-error"]
    if errors:
        first = errors[0]
        raise SuiteError(f"{inert(first.get('where') or suite.path)} does not collect: "
                         f"{_last_line(first.get('text', ''))}: fix it and run again")
    tests = {e["test"]: _fixtures(e.get("fixtures")) for e in events
             if e.get("event") == "collected" and isinstance(e.get("test"), str)}
    if code not in (0, 5) and not tests:
        raise SuiteError(f"{inert(suite.path)}: pytest stopped while collecting (exit code "
                         f"{code}): {_last_line(output)}")
    return tests


def run(suite, spec, tests, test_seconds=TEST_SECONDS, isolation=None):
    """{test id: Outcome} for ``tests`` against the implementation ``spec`` names (its
    locator, contract, backend, and whether it is a canary), which runs in a worker confined
    to ``isolation`` (:class:`attnzoo.sandbox.confine.Isolation`; None: not confined)."""
    results, remaining = {}, list(tests)
    with tempfile.TemporaryDirectory(prefix="attnzoo-grade-") as tmp:
        attempt = 0
        while remaining:
            attempt += 1
            record = os.path.join(tmp, f"run{attempt}.jsonl")
            done, stopped = _one_process(suite, dict(spec, record=record), remaining, tmp,
                                         test_seconds, isolation)
            results.update(done)
            left = [t for t in remaining if t not in results]
            if left and len(left) == len(remaining):  # no progress: the run cannot get going
                for t in left:
                    results[t] = Outcome("died", text=stopped or "the run stopped before it")
                left = []
            remaining = left
    return {t: results[t] for t in tests}


def _one_process(suite, spec, tests, tmp, test_seconds, isolation=None):
    """Run until the process ends or a test overruns; the outcomes it reached, and why it ended."""
    held = []  # the implementation's worker, once started
    try:
        proc, output = _spawn(suite, spec, tests, tmp, isolation, held)
        return _watch(spec, tests, test_seconds, held[0], proc, output)
    finally:
        for worker in held:
            worker.close_later()


def _watch(spec, tests, test_seconds, worker, proc, output):
    wanted, results = set(tests), {}
    current, since, offset, stopped = None, time.monotonic(), 0, ""
    while True:
        code = proc.poll()
        events, offset = _read_from(spec["record"], offset)
        for e in events:
            test = e.get("test")
            if not isinstance(test, str) or test not in wanted:
                continue
            if e.get("event") == "start":
                current, since = test, time.monotonic()
            elif e.get("event") == "done" and e.get("outcome") in OUTCOMES:
                results[test] = Outcome(e["outcome"], inert(str(e.get("exception", ""))[:200]),
                                        inert(str(e.get("text", ""))[:TEXT], lines=True))
                current, since = None, time.monotonic()
        worker.drain()
        if code is not None:
            _reap(proc)
            break
        limit = test_seconds if current else START_SECONDS + test_seconds
        if time.monotonic() - since > limit:
            _kill(proc)
            if current:
                results[current] = Outcome("hung", text=f"no result within {test_seconds:g} s; "
                                           "the process was killed")
            stopped = f"no test started within {limit:g} s"
            return results, stopped
        time.sleep(POLL)
    if current and current not in results:
        results[current] = Outcome("died", text=_how(code, output))
    stopped = _how(code, output)
    return results, stopped


class Relay:
    """The implementation's worker for one pytest process: started, told what to load, and
    its connection handed to the run (None for a collection, which calls nothing)."""

    def __init__(self, spec, isolation):
        self.proc = self.output = self.sock = None
        self.functions, self.waiting = [], False
        if not spec.get("locator"):
            return
        ours, theirs = wire.pair()
        try:
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            self.proc, self.output = hygiene.spawn(theirs.fileno(), env, isolation)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        try:
            ours.settimeout(START_SECONDS)
            wire.send(ours, {"verb": "relay", "locator": spec["locator"],
                             "contract": spec["contract"], "canary": bool(spec.get("canary"))})
        except OSError as e:
            self.close()
            raise OSError(f"the implementation's worker did not start: {e}") from None
        self.waiting = True  # its word comes while the pytest run starts: ready() reads it

    def ready(self):
        """Wait for the worker's word that it loaded the implementation (its functions)."""
        if self.sock is None or not self.waiting:
            return
        self.waiting = False
        try:
            reply, _ = wire.read(self.sock, START_SECONDS)
        except (OSError, EOFError, TimeoutError, wire.Malformed) as e:
            self.close()
            raise OSError(f"the implementation's worker did not start: {e}") from None
        found = reply.get("relaying") if isinstance(reply, dict) else None
        if not isinstance(found, dict) or not isinstance(found.get("functions"), list):
            self.close()
            raise OSError(f"the implementation's worker did not start: "
                          f"{inert(str(reply)[:300])}")
        self.functions = [f for f in found["functions"] if isinstance(f, str)]

    def handed(self):
        """The connection's descriptor for the run; this process keeps no copy after."""
        return None if self.sock is None else self.sock.fileno()

    def release(self):
        """After the run has its copy: ours closes, so the worker ends when the run does."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def drain(self):
        if self.output is not None:
            self.output.drain()

    def close_later(self):
        """Close in a thread of its own (killing and reaping takes a few milliseconds, spent
        while the next run starts); :func:`settle` waits for every such close."""
        self.release()
        if self.proc is None:
            return
        closing = threading.Thread(target=self.close, name="attnzoo-relay-close")
        with _closing_lock:
            _closing.append(closing)
        closing.start()

    def close(self):
        self.release()
        if self.proc is not None:
            hygiene.kill(self.proc)
            self.output.drain()
            self.output.stream.close()
            self.proc = None


_closing = []  # threads closing workers (Relay.close_later)
_closing_lock = threading.Lock()


def settle():
    """Wait until every implementation's worker closed so far is gone, killed and reaped."""
    while True:
        with _closing_lock:
            if not _closing:
                return
            closing = _closing.pop()
        closing.join()


_unscoped = {}  # why a graded run could not be scoped, once per reason
_unscoped_lock = threading.Lock()


def unscoped():
    """Why graded runs of this process were not scoped (one phrase), or None."""
    with _unscoped_lock:
        return next(iter(_unscoped), None)


def _spawn(suite, spec, args, tmp, isolation=None, held=None):
    """Fork the pytest run, confined to ``isolation`` (None: scoped only), then (``held``
    given) the implementation's worker, which forks and loads while the run starts; the spec,
    the record file (opened here, for appending) and the worker's connection go to the run on
    the socket it inherits. The worker is appended to ``held`` (the caller closes it)."""
    fd, path = tempfile.mkstemp(dir=tmp, suffix=".out")
    os.close(fd)
    command = suite.command(tmp, args)
    env, scratch, confinement = suite.env(), None, None
    if isolation is not None:
        scratch, env = hygiene.scratch_env(env)
        confinement = isolation.request(scratch)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = zygote.spawn_pytest(command[3:], suite.root, env, path,  # after `-m pytest`
                                   theirs.fileno(), confinement=confinement)
    except BaseException:
        ours.close()
        hygiene.remove(scratch)
        raise
    finally:
        theirs.close()
    hygiene.watch(proc, scratch)
    if isolation is not None and proc.confined != isolation.level:
        ours.close()
        _kill(proc)
        raise OSError(f"the graded run could not be confined ({isolation.level} isolation): "
                      f"{proc.unconfined or 'it died first'}")
    if proc.unscoped:
        with _unscoped_lock:
            _unscoped.setdefault(inert(proc.unscoped), True)
    worker = None
    if held is not None:
        try:
            worker = Relay(spec, isolation)
            held.append(worker)
            worker.ready()  # it loaded while the run started
        except BaseException:
            ours.close()
            _kill(proc)
            raise
    given = {"contract": spec["contract"], "backend": spec.get("backend"),
             "functions": worker.functions if worker is not None else []}
    relay = worker.handed() if worker is not None else None
    record = os.open(spec["record"], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                     0o600)
    try:
        socket.send_fds(ours, [json.dumps(given).encode()],
                        [record] + ([relay] if relay is not None else []))
    except OSError:  # the run died at once: its exit says how
        pass
    finally:
        os.close(record)
        ours.close()
        if worker is not None:
            worker.release()
    return proc, open(path, "rb")


def _kill(proc):
    """SIGKILL the run, its group, its session and every descendant (the test's own children,
    daemons included), then reap it and remove its scratch."""
    hygiene.kill(proc)


def _reap(proc):
    """After the run ended: whatever it started and left behind goes with it."""
    hygiene.kill(proc)


def _how(code, output):
    if code is not None and code < 0:
        return f"the process was killed by {signal.Signals(-code).name} during this test"
    return f"the process exited with code {code} during this test: {_last_line(output)}"


def _last_line(source):
    if hasattr(source, "seek"):
        source.seek(0)
        source = source.read()[-4000:].decode("utf-8", "replace")
    lines = [ln.strip() for ln in str(source).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E ")]
    line = (errors or lines or ["no output"])[-1]
    return inert(line.removeprefix("E ").strip()[:300])


def _fixtures(names):
    """The fixtures of ours a collected test uses, as the record names them."""
    return tuple(f for f in FIXTURES if isinstance(names, list) and f in names)


def _read(path):
    return _read_from(path, 0)[0]


def _read_from(path, offset):
    """Complete JSON lines after ``offset``; anything that is not a JSON object is ignored."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    events = []
    for line in data[:end].splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events, offset + end
