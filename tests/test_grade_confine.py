"""``attnzoo grade``'s graded pytest runs under ``--isolation strict``: walled in as check's
workers are, and nothing they start outlives the grade.

Hostile suites (tests/targets/grade/escapes_*.py) try to write a zoo file, the project's files,
a ``.pth`` into site-packages and a file in the account's home, to reach a TCP listener this
test starts, to open a Unix socket or the terminal: each of their tests passes only where the
attempt is refused, so a passing cell is a confined run, and the files are hashed before and
after. The normal suites grade the same confined as scoped only. A suite that double-forks a
daemon, starts a child and ignores SIGTERM (tests/targets/grade/lingers.py) leaves no process
behind when the grade ends, normally or by SIGTERM, SIGHUP or SIGINT.
"""

import hashlib
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import uuid
from pathlib import Path

import pytest
from test_sandbox import as_from_a_terminal

from attnzoo.devtools import grade_page
from attnzoo.grade import model, render
from attnzoo.grade.run import Suite
from attnzoo.sandbox import confine

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "tests" / "targets" / "grade"
STRICT = confine.Isolation(confine.STRICT, 8 << 30, 1 << 30)
PICK = {"reference", "einsum", "mask-fill-zero", "softmax-in-place"}


@pytest.fixture(scope="module")
def strict():
    why = confine.unavailable()
    if why is not None:
        pytest.skip(f"strict isolation is not available here: {why}")
    return STRICT


def picked(row):
    return row.id in PICK


def outcomes(doc):
    return {(r["row"], t.split("::")[1]): (c["outcome"], c["exception"]) for r in doc["rows"]
            for t, c in r["cells"].items()}


def _digest(paths):
    """Each file's hash, and each folder's list of names: what a write would change."""
    out = {}
    for path in paths:
        if path.is_dir():
            out[str(path)] = sorted(os.listdir(path))
            for child in sorted(path.glob("*.py")) + sorted(path.glob("*.md")):
                out[str(child)] = hashlib.sha256(child.read_bytes()).hexdigest()
        elif path.exists():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


WATCHED = [ROOT, ROOT / "zoo", SUITES, Path(sysconfig.get_paths()["purelib"]),
           Path(pwd.getpwuid(os.getuid()).pw_dir)]


def test_a_strict_run_writes_nothing_outside_its_scratch(strict):
    before = _digest(WATCHED)
    doc = model.grade(Suite(SUITES / "escapes_files.py"), select=picked, isolation=strict)
    assert _digest(WATCHED) == before
    got = outcomes(doc)
    assert len(got) == 5 * len(doc["rows"]) > 0 and doc["summary"]["canaries"] > 0
    assert doc["summary"]["canaries_failed"] == 0
    refused = {k: v for k, v in got.items() if v != ("passed", "")}
    assert refused == {}, [(c["outcome"], c["text"][-600:]) for r in doc["rows"]
                           for c in r["cells"].values() if c["outcome"] != "passed"]


def test_a_strict_run_has_no_network_no_unix_socket_and_no_terminal(strict, monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        monkeypatch.setenv("ATTNZOO_TEST_PORT", str(listener.getsockname()[1]))
        doc = model.grade(Suite(SUITES / "escapes_network.py"),
                          select=lambda r: r.id in ("reference", "mask-fill-zero"),
                          isolation=strict)
        with pytest.raises(BlockingIOError):
            listener.accept()  # no run reached it
    got = outcomes(doc)
    assert doc["summary"]["false_alarms"] == 0
    assert got and set(got.values()) == {("passed", "")}, \
        [(c["outcome"], c["text"][-600:]) for r in doc["rows"] for c in r["cells"].values()]


COMPARED = {"known_suite.py": 10, "sdpa_suite.py": 10, "exceptions.py": 10,
            "false_alarm.py": 10, "kills.py": 10, "identifies.py": 10,
            "judges_by_name.py": 10, "hostile.py": 3}


@pytest.mark.parametrize("name", sorted(COMPARED))
def test_a_normal_suite_grades_the_same_confined_as_scoped_only(strict, name):
    suite = Suite(SUITES / name)
    pick = picked if name != "hostile.py" else (lambda r: r.id == "reference")
    confined = model.grade(suite, select=pick, test_seconds=COMPARED[name], isolation=strict)
    scoped = model.grade(suite, select=pick, test_seconds=COMPARED[name])
    assert outcomes(confined) == outcomes(scoped)
    assert confined["summary"] == scoped["summary"]


def test_the_lesson_tests_grade_the_same_and_the_report_says_strict(strict):
    done = subprocess.run([sys.executable, "-m", "attnzoo", "grade", grade_page.TESTS.as_posix(),
                           "--json", "--reveal", "--isolation", "strict", "--memory-limit", "2G"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert grade_page.compact(doc) == grade_page.load(ROOT / grade_page.JSON_PATH)
    iso = doc["isolation"]
    assert (iso["level"], iso["tests"], iso["implementations"]) == ("strict",) * 3
    assert iso["memory_limit"] == 2 << 30 and iso["fallback"] is None and iso["tests_scoped"]


def test_the_text_report_says_which_isolation_the_graded_runs_had():
    done = subprocess.run([sys.executable, "-m", "attnzoo", "grade", grade_page.TESTS.as_posix(),
                           "--isolation", "process"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    first = done.stdout.splitlines()[0]
    assert first.startswith("isolation (graded tests and implementations): process: "), first
    assert "your files and network" in first
    committed = grade_page.load(ROOT / grade_page.JSON_PATH)
    assert render.text(model.hide(committed)) in done.stdout


# -- nothing outlives the grade --------------------------------------------------------------


def _marked(marker):
    """Live processes whose command line carries ``marker`` or whose name is its start."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                comm, rest = f.read().split(b" (", 1)[1].rsplit(b")", 1)
        except (OSError, ValueError):
            continue
        if rest.split()[0] != b"Z" and (marker.encode() in cmdline or
                                         comm == marker[:15].encode()):
            out.append(int(name))
    return out


@pytest.mark.parametrize("level,how", [("strict", "exit"), ("strict", "SIGTERM"),
                                       ("strict", "SIGHUP"), ("strict", "SIGINT"),
                                       ("process", "SIGTERM"), ("process", "SIGINT")])
def test_nothing_a_graded_suite_starts_outlives_the_grade(level, how):
    if level == "strict" and confine.unavailable() is not None:
        pytest.skip(f"strict isolation is not available here: {confine.unavailable()}")
    marker = f"{uuid.uuid4().hex[:14]}-attnzoo-linger"  # its first 15: the run's name
    env = dict(os.environ, ATTNZOO_TEST_MARKER=marker,
               ATTNZOO_TEST_LINGER="0" if how == "exit" else "60")
    grade = subprocess.Popen([sys.executable, "-m", "attnzoo", "grade",
                              str(SUITES / "lingers.py"), "--json", "--isolation", level],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=as_from_a_terminal)  # even under nohup
    try:
        if how != "exit":
            until = time.monotonic() + 120
            while len(_marked(marker)) < 3 and grade.poll() is None:  # run, daemon, child
                assert time.monotonic() < until, "the suite's processes never appeared"
                time.sleep(0.05)
            grade.send_signal(getattr(signal, how))
        out, err = grade.communicate(timeout=600)
        want = 0 if how == "exit" else 128 + getattr(signal, how)
        assert grade.returncode == want, err[-2000:]
        if how == "exit":
            assert json.loads(out)["summary"]["false_alarms"] == 0
        until = time.monotonic() + 5
        while _marked(marker) and time.monotonic() < until:
            time.sleep(0.05)
        assert _marked(marker) == []
    finally:
        grade.kill()
        grade.wait()
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)
