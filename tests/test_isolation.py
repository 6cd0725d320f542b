"""Isolation: what the code under test can reach, under each level (docs/sandbox.md).

Hostile targets from tests/targets/ run under the real console script, each in a session of
its own (a signal that got through would end that session, not pytest), with TMPDIR pointed at
a folder of the test's, and a mark in their environment by which every process of the run can
be found. Each test asserts the exit code, the verdict, what the target's attempts left outside
(the files it tried to write, a connection it tried to make, the terminal's echo), that no
scratch directory is left in that TMPDIR and that no marked process outlives the run. The
strict tests are skipped, saying why, where the kernel lacks what strict needs.
"""

import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sysconfig
import time
import uuid
from pathlib import Path

import pytest
from test_cli import ATTNZOO, PYTHON, REPO, TARGETS, findings, one_error_line, only
from test_cli import attnzoo as in_process
from test_sandbox import in_pty

import attnzoo
from attnzoo.sandbox import confine

PROGRESS = re.compile(r"attnzoo: (\[\d+/\d+\] \w+|loading the target): ")


def said(stderr):
    """stderr without the progress lines a check writes when stderr is not a terminal."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not PROGRESS.match(line))

WHY_NOT = confine.unavailable()
strict_only = pytest.mark.skipif(WHY_NOT is not None, reason=f"no strict isolation: {WHY_NOT}")
LEVELS = [pytest.param("strict", marks=strict_only), "process"]


class Run:
    """One ``attnzoo check`` in a session of its own, its TMPDIR and its mark."""

    def __init__(self, tmp_path, **env):
        self.mark = uuid.uuid4().hex
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir(exist_ok=True)
        self.env = dict(os.environ, TMPDIR=str(self.tmp), ATTNZOO_TEST_MARK=self.mark,
                        **{k: str(v) for k, v in env.items()})

    def check(self, *args, cwd=REPO, command=(ATTNZOO,), timeout=180):
        p = subprocess.run([*command, "check", *args, "--json"], cwd=cwd, env=self.env,
                           capture_output=True, text=True, timeout=timeout,
                           start_new_session=True, stdin=subprocess.DEVNULL)
        doc = json.loads(p.stdout) if p.stdout.strip() else None
        return p, doc

    def left(self):
        """Processes of the run still alive, and what is left in its TMPDIR."""
        assert wait_for(lambda: not marked(self.mark)), f"left running: {marked(self.mark)}"
        return sorted(os.listdir(self.tmp))


def marked(mark):
    """Live processes whose environment carries ``mark``."""
    needle = f"ATTNZOO_TEST_MARK={mark}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    environ = f.read()
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in environ.split(b"\0") and state != b"Z":
                found.append(int(name))
    return found


def wait_for(condition, seconds=30):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def printed(doc):
    return " ".join(n for f in findings(doc) for n in f["notes"])


# -- writes ---------------------------------------------------------------------------------


@strict_only
def test_writes_outside_the_scratch_fail_and_the_verdict_stands(tmp_path):
    """At import and in every call: a module beside attnzoo's, a .pth in site-packages and a
    file in the home directory, and a change of mode, times and extended attributes of a file
    of the test's, all refused; its own scratch takes its file; the doubled output is still
    flagged."""
    owned = tmp_path / "owned"
    owned.write_text("the test's")
    owned.chmod(0o600)
    before = owned.stat()
    run = Run(tmp_path, ATTNZOO_TEST_OWNED=owned)
    victims = [Path(attnzoo.__file__).parent / f"hostile_{run.mark}.py",
               Path(sysconfig.get_paths()["purelib"]) / f"hostile_{run.mark}.pth",
               Path(pwd.getpwuid(os.getuid()).pw_dir) / f".hostile_{run.mark}"]
    try:
        p, doc = run.check(f"{TARGETS}/writes_outside.py", *only("known_answers"))
        written = [str(v) for v in victims if v.exists()]
    finally:
        for v in victims:
            v.unlink(missing_ok=True)
    assert p.returncode == 1, p.stderr
    assert [f["verdict"] for f in findings(doc)] == ["killed"]
    assert doc["isolation"]["level"] == "strict"
    assert f"refused: {['PermissionError'] * 6}" in printed(doc)
    assert written == []
    after = owned.stat()
    assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns)
    assert "user.hostile" not in os.listxattr(owned)
    assert run.left() == []


def project_copy(tmp_path):
    """attnzoo's sources in a folder of the test's, for a target to spoil."""
    copy = tmp_path / "project"
    for part in ("attnzoo", "detectors", "reference", "zoo"):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "targets").mkdir()
    shutil.copy(REPO / TARGETS / "rewrites_attnzoo.py", copy / "targets")
    return copy


@pytest.mark.parametrize("level", LEVELS)
def test_modules_the_parent_needs_are_imported_before_a_target_can_rewrite_them(tmp_path,
                                                                               level):
    """The target appends ``os._exit(0)`` to the project's modules that the parent would
    otherwise import only after the target had run (run from a copy of the project): under
    process the files change and the parent, having imported them already, still flags the
    doubled output; under strict the files do not change."""
    copy = project_copy(tmp_path)
    run = Run(tmp_path, PYTHONPATH=copy)
    p, doc = run.check("targets/rewrites_attnzoo.py", *only("known_answers"),
                       "--isolation", level, cwd=copy, command=(PYTHON, "-m", "attnzoo"))
    assert p.returncode == 1, (p.stdout[-2000:], p.stderr[-2000:])
    assert [f["verdict"] for f in findings(doc)] == ["killed"]
    spoiled = [m for m in ("reference/lesson_numpy.py", "reference/sdpa.py", "attnzoo/runner.py")
               if "os._exit(0)" in (copy / m).read_text()]
    assert spoiled == ([] if level == "strict" else ["reference/lesson_numpy.py",
                                                     "reference/sdpa.py", "attnzoo/runner.py"])
    assert run.left() == []


@pytest.mark.parametrize("level", LEVELS)
def test_the_scratch_is_capped(tmp_path, level):
    """Writing 2 MiB into its scratch with --scratch-limit 1M fails: the call crashes; with
    the default limit the same target is conformant."""
    run = Run(tmp_path, ATTNZOO_TEST_MB=2)
    p, doc = run.check(f"{TARGETS}/fills_scratch.py", *only("known_answers"),
                       "--isolation", level, "--scratch-limit", "1M")
    assert p.returncode == 1, p.stderr
    (finding,) = findings(doc)
    assert finding["verdict"] == "crashed"
    assert any(word in finding["message"] for word in ("No space left", "File too large"))
    assert doc["isolation"]["scratch_limit"] == 1 << 20
    p, doc = run.check(f"{TARGETS}/fills_scratch.py", *only("known_answers"),
                       "--isolation", level)
    assert p.returncode == 0, p.stderr
    assert run.left() == []


# -- memory ---------------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_memory_past_the_limit_is_a_crash_of_the_target(tmp_path, level):
    """A 2 GiB allocation in every call under --memory-limit 1G: each call crashes with
    MemoryError, the run ends with exit 1 and attnzoo reports it; under 4G it goes through."""
    run = Run(tmp_path, ATTNZOO_TEST_GB=2)
    p, doc = run.check(f"{TARGETS}/allocates.py", *only("known_answers", "causality"),
                       "--isolation", level, "--memory-limit", "1G")
    assert p.returncode == 1, p.stderr
    assert [f["verdict"] for f in findings(doc)] == ["crashed", "crashed"]
    assert all("MemoryError" in f["message"] for f in findings(doc))
    assert doc["isolation"] == {"level": level, "memory_limit": 1 << 30,
                                "scratch_limit": 1 << 30, "fallback": None}
    p, doc = run.check(f"{TARGETS}/allocates.py", *only("known_answers"),
                       "--isolation", level, "--memory-limit", "4G")
    assert p.returncode == 0, p.stderr
    assert run.left() == []


# -- processes, network, terminal -------------------------------------------------------------


@strict_only
def test_nothing_outside_its_own_processes_is_reachable(tmp_path):
    """At import and in every call the target SIGKILLs attnzoo, the worker server and its
    group, opens attnzoo's memory and its terminal, and connects to a TCP port and a Unix
    socket this test listens on: attnzoo lives to flag the doubled output, no connection
    arrives, and the terminal keeps its echo and gets no line."""
    run = Run(tmp_path)
    tcp = socket.create_server(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(tmp_path / "listening"))
    unix.listen()
    try:
        env = dict(run.env, ATTNZOO_TEST_PORT=tcp.getsockname()[1],
                   ATTNZOO_TEST_SOCKET=str(tmp_path / "listening"))
        code, output, echo = in_pty([ATTNZOO, "check", f"{TARGETS}/reaches_out.py",
                                     *only("known_answers")], {k: str(v) for k, v in
                                                                env.items()})
        arrived = []
        for listener in (tcp, unix):
            listener.setblocking(False)
            try:
                arrived.append(listener.accept())
            except BlockingIOError:
                pass
    finally:
        tcp.close()
        unix.close()
    assert code == 1, output[-3000:]
    assert "FLAGGED known_answers" in output and "isolation: strict" in output
    assert "kill attnzoo: PermissionError" in output  # the note of what it printed
    assert arrived == []
    assert echo and "WRITTEN-TO-TTY" not in output
    assert run.left() == []


@strict_only
def test_background_processes_of_a_strict_worker_die_with_the_run(tmp_path):
    """The target of test_sandbox's hygiene tests (a child in its group, a daemon that left its
    session), strict: nothing of it outlives a normal exit, nor SIGTERM during a hang."""
    run = Run(tmp_path)
    p, doc = run.check(f"{TARGETS}/spawns.py", *only("known_answers"))
    assert p.returncode == 0, p.stderr
    assert doc["isolation"]["level"] == "strict"
    assert run.left() == []
    run.env["ATTNZOO_TEST_HANG"] = "1"
    proc = subprocess.Popen([ATTNZOO, "check", f"{TARGETS}/spawns.py", "--timeout", "60",
                             *only("known_answers")], cwd=REPO, env=run.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        # the worker, its child and the daemon: the import is done, the call has begun
        assert wait_for(lambda: len(marked(run.mark)) >= 5, 60), marked(run.mark)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert run.left() == []


# -- the levels and their fallback ------------------------------------------------------------


def test_process_isolation_still_works_and_the_report_names_the_level(tmp_path):
    run = Run(tmp_path)
    p, doc = run.check("reference/lesson_numpy.py", *only("known_answers"),
                       "--isolation", "process")
    assert p.returncode == 0 and said(p.stderr) == "", p.stderr
    assert doc["isolation"]["level"] == "process"
    text = in_process("check", "reference/lesson_numpy.py", *only("known_answers"),
                      "--isolation", "process")
    assert text.stdout.splitlines()[0].startswith("isolation: process: its own processes")
    assert run.left() == []


@strict_only
def test_strict_is_the_default_where_the_kernel_has_it():
    p = in_process("check", "reference/lesson_numpy.py", *only("known_answers"))
    assert p.returncode == 0 and said(p.stderr) == "", p.stderr
    assert p.stdout.splitlines()[0].startswith(
        "isolation: strict: writes only to its scratch and /dev/null, no network")


@pytest.fixture
def no_strict(monkeypatch):
    """A kernel without Landlock, as attnzoo's probe would find it."""
    monkeypatch.setattr(confine, "_unavailable", "this kernel has no Landlock")


def test_without_the_kernel_support_strict_is_bad_input(no_strict):
    line = one_error_line(in_process("check", "reference/lesson_numpy.py", "--isolation",
                                     "strict"))
    assert "--isolation strict: this kernel has no Landlock: use --isolation process" in line


def test_without_the_kernel_support_the_default_falls_back_saying_so(no_strict):
    p = in_process("check", "reference/lesson_numpy.py", *only("known_answers"), "--json")
    assert p.returncode == 0
    assert said(p.stderr).splitlines() == [
        "attnzoo: isolation process, not strict: this kernel has no Landlock; the code under "
        "test runs with your rights: your files, your processes, your network"]
    assert json.loads(p.stdout)["isolation"] == {
        "level": "process", "memory_limit": 8 << 30, "scratch_limit": 1 << 30,
        "fallback": "this kernel has no Landlock"}


@pytest.mark.parametrize("argv, words", [
    (["--memory-limit", "lots"], ["--memory-limit must be a size such as 512M or 8G, not 'lots'"]),
    (["--memory-limit", "100M"], ["--memory-limit must be a size from 512M", "'100M'"]),
    (["--scratch-limit", "10K"], ["--scratch-limit must be a size from 1M"]),
    (["--isolation", "none"], ["--isolation", "invalid choice: 'none'"]),
])
def test_bad_isolation_options_are_one_line(argv, words):
    line = one_error_line(in_process("check", "reference/lesson_numpy.py", *argv))
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"


SAYS_WHERE = """
import os
print(os.environ["TMPDIR"], os.environ["HOME"], os.environ.get("XDG_RUNTIME_DIR"))
from reference.lesson_numpy import attention, causal_mask, causal_self_attention, softmax
"""


def test_a_confined_worker_says_so_and_its_scratch_goes_with_it(tmp_path, monkeypatch):
    """Through the sandbox's own API: the server's word on the worker, the scratch as TMPDIR and
    HOME while it runs (strict: a tmpfs no one else sees), nothing left after."""
    from attnzoo.sandbox.isolated import Isolated
    from attnzoo.sandbox.target import Target

    (tmp_path / "says_where.py").write_text(SAYS_WHERE)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/elsewhere")
    monkeypatch.setattr("tempfile.tempdir", None)
    level = "process" if WHY_NOT else "strict"
    ex = Isolated(Target("lesson", str(tmp_path / "says_where.py")),
                  isolation=confine.Isolation(level, 1 << 30, 1 << 24))
    try:
        assert ex.proc.confined == level and ex.proc.unconfined is None
        scratch = ex.proc.scratch
        assert Path(scratch).parent == tmp_path
        ex.output.drain()
        assert ex.output.first_line() == f"{scratch} {scratch} None"
        if level == "strict":  # the worker's own mount: the tmpfs, of the size asked
            mounts = Path(f"/proc/{ex.proc.pid}/mounts").read_text().splitlines()
            (line,) = [m for m in mounts if m.split()[1] == scratch]
            assert line.split()[2] == "tmpfs" and "size=16384k" in line
            assert not any(m.split()[1] == scratch
                           for m in Path("/proc/self/mounts").read_text().splitlines())
    finally:
        ex.close()
    assert not Path(scratch).exists()


# -- the pytest plugin ------------------------------------------------------------------------

pytest_plugins = ["pytester"]


def plugin_run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


@strict_only
def test_the_plugins_worker_is_strict_by_default(pytester, monkeypatch):
    """The plugin's worker is confined as check's is: the hostile writes are refused, the
    doubled output fails its test, and the header names the level."""
    shutil.copy(REPO / TARGETS / "writes_outside.py", pytester.path)
    mark = uuid.uuid4().hex
    monkeypatch.setenv("ATTNZOO_TEST_MARK", mark)
    victims = [Path(attnzoo.__file__).parent / f"hostile_{mark}.py",
               Path(sysconfig.get_paths()["purelib"]) / f"hostile_{mark}.pth",
               Path(pwd.getpwuid(os.getuid()).pw_dir) / f".hostile_{mark}"]
    try:
        result = plugin_run(pytester, "--attnzoo-target", "writes_outside.py",
                            "--attnzoo-only", "known_answers")
        written = [str(v) for v in victims if v.exists()]
    finally:
        for v in victims:
            v.unlink(missing_ok=True)
    result.assert_outcomes(failed=1)
    assert "attnzoo: isolation: strict: writes only to its scratch" in result.stdout.str()
    assert written == []
    assert wait_for(lambda: not marked(mark)), marked(mark)


def test_the_plugin_takes_the_isolation_options(pytester):
    pytester.makepyfile(good="from reference.lesson_numpy import causal_mask, softmax, "
                        "attention, causal_self_attention\n")
    result = plugin_run(pytester, "--attnzoo-target", "good.py", "--attnzoo-only",
                        "known_answers", "--attnzoo-isolation", "process",
                        "--attnzoo-memory-limit", "2G")
    result.assert_outcomes(passed=1)
    assert "attnzoo: isolation: process: its own processes with your rights" in \
        result.stdout.str() and "memory 2G, scratch 1G" in result.stdout.str()
    bad = plugin_run(pytester, "--attnzoo-target", "good.py", "--attnzoo-scratch-limit", "x")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--attnzoo-scratch-limit must be a size" in bad.stderr.str()


@strict_only
def test_sigterm_to_pytest_under_the_plugin_leaves_nothing_of_the_target(tmp_path):
    """The same target under ``pytest --attnzoo-target``: SIGTERM to pytest during its hang
    kills the worker, its child and the daemon that left its session, as check's does."""
    run = Run(tmp_path, ATTNZOO_TEST_HANG="1")
    proc = subprocess.Popen([PYTHON, "-m", "pytest", "-p", "no:cacheprovider",
                             "--attnzoo-target", str(REPO / TARGETS / "spawns.py"),
                             "--attnzoo-timeout", "60", "--attnzoo-only", "known_answers"],
                            cwd=tmp_path,
                            env=run.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert wait_for(lambda: len(marked(run.mark)) >= 5, 60), marked(run.mark)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    run.left()


def test_what_a_graded_test_double_forks_dies_with_its_run(tmp_path):
    """A graded test that leaves a daemon in a session of its own, on every implementation
    row: none outlives the grade (each run is its orphans' subreaper, the server kills what
    an ended run orphaned)."""
    suite = tmp_path / "test_daemon.py"
    suite.write_text("import os, time\n\n\ndef test_leaves_a_daemon(attention):\n"
                     "    if os.fork() == 0:\n        os.setsid()\n"
                     "        if os.fork() == 0:\n            time.sleep(300)\n"
                     "        os._exit(0)\n", encoding="utf-8")
    run = Run(tmp_path)
    p = subprocess.run([ATTNZOO, "grade", str(suite), "--json"], cwd=tmp_path, env=run.env,
                       capture_output=True, text=True, timeout=600, start_new_session=True)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    assert json.loads(p.stdout)["summary"]["implementations"] > 10
    assert wait_for(lambda: not marked(run.mark)), f"left running: {marked(run.mark)}"
