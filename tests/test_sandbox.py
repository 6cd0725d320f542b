"""The sandbox of ``attnzoo check``: no target can talk it into a verdict, and nothing outlives it.

Each test runs the real console script on a hostile target from tests/targets/ with short time
limits. What they show: nothing the worker sends is unpickled (a payload that would create a
marker file never runs); answers are read from storage, not through a subclass's methods; the
decisions are made in the parent (monkeypatched comparisons change nothing); SIGTERM, SIGHUP and
SIGINT during a hang, and a normal exit, leave no process of the run alive (checked by pid and
process group); the terminal is untouched; output is capped; warm-ups, import limits and a
deadline behave; and every fault of the target is exit 1 or 2, never 3.
"""

import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pytest
from test_cli import ATTNZOO, REPO, TARGETS, findings, one_error_line, only, said
from test_cli import console as attnzoo  # the console script: isolation is the point here

FLAGGED = {"killed", "nan", "crashed", "hung"}


def env(**extra):
    return dict(os.environ, **{k: str(v) for k, v in extra.items()})


def check(*args, **kw):
    p = attnzoo("check", *args, "--json", timeout=kw.pop("timeout", 120), **kw)
    assert p.returncode in (0, 1, 2, 4), (p.returncode, p.stderr[-2000:])
    return p, (json.loads(p.stdout) if p.stdout.strip() else None)


def alive(pid):
    """Running (not a zombie) on this machine."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def in_group(pgid):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                found.append(int(name))
    return found


def pids(path):
    rows = [line.split() for line in Path(path).read_text().splitlines()]
    return {role: (int(pid), int(pgid)) for role, pid, pgid in rows}


def wait_for(condition, seconds=60):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


# -- nothing from the worker is unpickled -----------------------------------------------------


@pytest.mark.parametrize("when, codes", [("call", (1,)), ("import", (2,))])
def test_pickle_payload_through_the_socket_runs_no_code(tmp_path, when, codes):
    marker = tmp_path / "marker"
    p, doc = check(f"{TARGETS}/pickle_socket.py", *only("known_answers"),
                   env=env(ATTNZOO_TEST_MARKER=marker, ATTNZOO_TEST_WHEN=when))
    assert not marker.exists(), "the payload ran"
    assert p.returncode in codes, p.stderr
    if when == "call":
        f, = findings(doc)
        assert f["verdict"] == "crashed" and "protocol" in f["message"], f["message"]
    else:
        assert "broke attnzoo's protocol" in one_error_line(p)


def test_pickle_payload_in_returned_objects_runs_no_code(tmp_path):
    marker = tmp_path / "marker"
    p, doc = check(f"{TARGETS}/pickle_return.py", env=env(ATTNZOO_TEST_MARKER=marker))
    assert not marker.exists(), "the payload ran"
    assert p.returncode == 1
    verdicts = {f["verdict"] for f in findings(doc)}
    assert "killed" in verdicts  # the wrong answers inside the smuggling subclass are read
    assert any("returned a Payload, not a numpy.ndarray" in f["message"] for f in findings(doc))


# -- decisions are made in the parent -------------------------------------------------------


def test_monkeypatched_comparisons_hide_nothing():
    p, doc = check(f"{TARGETS}/monkeypatches.py", *only("input_immutability",
                                                       "dtype_follows_input"))
    assert p.returncode == 1
    verdicts = {f["detector"]: f["verdict"] for f in findings(doc)}
    assert verdicts == {"input_immutability": "killed", "dtype_follows_input": "killed"}


def test_the_lying_subclass_does_lie():
    """The hostile target really would fool a harness that reads through tensor methods."""
    import torch

    sys.path.insert(0, str(REPO / TARGETS))
    try:
        import lying_tensor
    finally:
        sys.path.pop(0)
    q, k, v = (torch.randn(1, 2, 3, 4, dtype=torch.float64) for _ in range(3))
    out = lying_tensor.sdpa(q, k, v)
    right = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert torch.equal(out.detach().to("cpu"), right)
    assert np.array_equal(out.detach().numpy(), right.numpy())
    with torch._C.DisableTorchFunction():
        stored = torch._C.TensorBase.clone(out)
    assert not torch.allclose(stored, right)


def test_lying_tensor_subclass_is_still_flagged():
    p, doc = check(f"{TARGETS}/lying_tensor.py:sdpa", *only("known_answers",
                                                           "matches_loop_oracle"))
    assert p.returncode == 1
    assert {f["verdict"] for f in findings(doc)} == {"killed"}, [f["message"] for f in
                                                                  findings(doc)]


# -- process hygiene ------------------------------------------------------------------------


def as_from_a_terminal():
    """The signals as a shell's foreground job has them, whatever this test process inherited:
    handled by default and not blocked."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


# the target writes its pids into a file of the test's, which only process isolation lets it do;
# test_isolation.py shows that nothing outlives a strict run either
RECORDING = ("--isolation", "process")


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129),
                                       (signal.SIGINT, 130)], ids=["TERM", "HUP", "INT"])
def test_signal_during_a_hang_leaves_no_process(tmp_path, sig, code):
    record = tmp_path / "pids"
    proc = subprocess.Popen(
        [ATTNZOO, "check", f"{TARGETS}/spawns.py", "--timeout", "60", *only("known_answers"),
         *RECORDING],
        cwd=REPO, env=env(ATTNZOO_TEST_PIDS=record, ATTNZOO_TEST_HANG=1),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        preexec_fn=as_from_a_terminal)
    try:
        assert wait_for(lambda: record.exists() and "hanging" in record.read_text()), \
            "the target never started hanging"
        seen = pids(record)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == code
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    worker_pid, group = seen["worker"]
    assert wait_for(lambda: not in_group(group)), f"left in the group: {in_group(group)}"
    assert_all_die(seen)


def test_background_children_die_with_the_run(tmp_path):
    record = tmp_path / "pids"
    p, doc = check(f"{TARGETS}/spawns.py", *only("known_answers"), *RECORDING,
                   env=env(ATTNZOO_TEST_PIDS=record))
    assert p.returncode == 0, p.stdout
    seen = pids(record)
    assert {"worker", "child", "daemon"} <= set(seen)
    assert seen["daemon"][1] != seen["worker"][1]  # it left the worker's group and session
    assert_all_die(seen)


FORKED_TARGET = """
import json, os, sys
with open(os.environ["ATTNZOO_TEST_OUT"], "w") as f:
    json.dump({"mark": os.environ.get("ATTNZOO_TEST_MARK"), "cwd": os.getcwd(),
               "path0": sys.path[0]}, f)
print("printed while importing")
from reference.sdpa import scaled_dot_product_attention as sdpa
"""


def test_a_worker_is_a_fork_of_the_server_set_up_as_python_m_would_start_it(tmp_path,
                                                                             monkeypatch):
    """Its own session, stdin from /dev/null, the parent's environment and folder, output that
    reaches the parent unbuffered; a restart is a new fork; a killed server takes its worker
    with it and the next worker comes from a new one."""
    from attnzoo.sandbox import zygote
    from attnzoo.sandbox.isolated import Isolated
    from attnzoo.sandbox.target import Target

    (tmp_path / "forked.py").write_text(FORKED_TARGET)
    monkeypatch.setenv("ATTNZOO_TEST_MARK", "from the parent")
    monkeypatch.setenv("ATTNZOO_TEST_OUT", str(tmp_path / "seen.json"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.chdir(tmp_path)
    ex = Isolated(Target("forked", "forked.py:sdpa", "sdpa", "torch"))
    try:
        pid, server = ex.proc.pid, zygote.server_pid()
        ppid, pgrp, session, _ = _stat(pid)
        assert ppid == server and pgrp == session == pid
        assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
        seen = json.loads((tmp_path / "seen.json").read_text())
        assert seen == {"mark": "from the parent", "cwd": str(tmp_path), "path0": str(tmp_path)}
        ex.output.drain()
        assert ex.output.first_line() == "printed while importing"
        ex.fresh()
        assert ex.proc.pid != pid and wait_for(lambda: not alive(pid))
        assert zygote.server_pid() == server
        worker = ex.proc.pid
        os.kill(server, signal.SIGKILL)
        assert wait_for(lambda: not alive(worker))  # its parent-death signal
        ex.fresh()
        assert zygote.server_pid() not in (None, server) and alive(ex.proc.pid)
    finally:
        ex.close()


def _stat(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode()


def assert_all_die(seen):
    """Every recorded process is gone, allowing for a SIGKILLed one that has yet to be scheduled
    to exit on a loaded machine (its /proc entry says "running" until then); they sleep 300 s."""
    survivors = lambda: [role for role, (pid, _) in seen.items() if alive(pid)]  # noqa: E731
    assert wait_for(lambda: not survivors()), survivors()


def in_pty(argv, env=None):
    """Run argv with a new pty as its controlling terminal, in a session of its own: (exit
    code, output, echo after). ATTNZOO_TEST_TTY names the pty's path, for a target that
    opens a terminal by its path."""
    master, slave = pty.openpty()

    def controlling():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = dict(os.environ if env is None else env, ATTNZOO_TEST_TTY=os.ttyname(slave))
    proc = subprocess.Popen(argv, cwd=REPO, stdin=slave, stdout=slave, stderr=slave, env=env,
                            preexec_fn=controlling)
    output = b""
    while proc.poll() is None or select.select([master], [], [], 0)[0]:
        if select.select([master], [], [], 0.1)[0]:
            try:
                output += os.read(master, 1 << 16)
            except OSError:
                break
    proc.wait(timeout=60)
    echo = bool(termios.tcgetattr(slave)[3] & termios.ECHO)
    os.close(master)
    os.close(slave)
    return proc.returncode, output.decode("utf-8", "replace"), echo


def test_the_tty_target_does_turn_echo_off_when_it_can():
    code, output, echo = in_pty([sys.executable, f"{TARGETS}/tty.py"])
    assert code == 0 and "WRITTEN-TO-TTY" in output and not echo


def test_dev_tty_writes_leave_the_terminal_untouched():
    code, output, echo = in_pty([ATTNZOO, "check", f"{TARGETS}/tty.py", *only("known_answers")])
    assert code == 0, output
    assert echo, "the terminal was left without echo"
    assert "WRITTEN-TO-TTY" not in output
    assert "[1/1] known_answers" in output  # progress is shown on a terminal


def test_large_output_is_capped():
    p, doc = check(f"{TARGETS}/loud.py", *only("known_answers"), env=env(ATTNZOO_TEST_MB=48))
    assert p.returncode == 0
    notes = [n for f in findings(doc) for n in f["notes"]]
    dropped = [n for n in notes if "bytes dropped" in n]
    assert dropped, notes
    assert int(dropped[0].split(": ")[-1].split()[0]) > 40 * 2**20


# -- time -----------------------------------------------------------------------------------


def test_a_warm_up_gets_its_allowance():
    """The same code path as the default options, scaled down: 2 s first call, 1 s limit."""
    e = env(ATTNZOO_TEST_WARMUP=2)
    detectors = only("known_answers", "matches_loop_oracle")
    p, doc = check(f"{TARGETS}/warmup.py", "--timeout", "1", "--warmup", "5", *detectors, env=e)
    assert p.returncode == 0, [f["message"] for f in findings(doc)]
    p, doc = check(f"{TARGETS}/warmup.py", "--timeout", "1", *detectors, env=e)
    assert p.returncode == 1 and "hung" in {f["verdict"] for f in findings(doc)}


def test_a_hang_gets_one_warm_up_allowance_not_one_per_restart():
    p, doc = check(f"{TARGETS}/hangs.py", "--timeout", "1", "--warmup", "3",
                   *only("known_answers", "matches_loop_oracle", "causality"))
    assert p.returncode == 1
    actual = [f["evidence"]["actual"] for f in findings(doc) if f["verdict"] == "hung"]
    assert actual == ["no answer within 3 s"] + ["no answer within 1 s"] * (len(actual) - 1)
    assert len(actual) == 3


@pytest.mark.slow
def test_a_20_s_warm_up_is_conformant_with_the_default_options():
    p, doc = check(f"{TARGETS}/warmup.py", *only("known_answers", "causality"), timeout=300,
                   env=env(ATTNZOO_TEST_WARMUP=20))
    assert p.returncode == 0, [f["message"] for f in findings(doc)]


def test_import_timeout_is_an_option():
    e = env(ATTNZOO_TEST_SECONDS=3)
    line = one_error_line(attnzoo("check", f"{TARGETS}/slow_import.py", "--import-timeout", "1",
                                  env=e))
    assert "slow_import.py" in line and "--import-timeout" in line
    p, _ = check(f"{TARGETS}/slow_import.py", "--import-timeout", "10", *only("known_answers"),
                 env=e)
    assert p.returncode == 0


def test_deadline_gives_a_truthful_partial_report():
    """A slow target and a short deadline: exit 4 (incomplete, nothing flagged so far), the
    partial report, and one line saying the deadline was reached and what did not run."""
    # 8 s: loading must fit in it on a loaded machine; the calls (0.2 s each) never do
    p, doc = check(f"{TARGETS}/slow.py", "--deadline", "8", env=env(ATTNZOO_TEST_SECONDS=0.2))
    assert p.returncode == doc["exit_code"] == 4
    impl, = doc["implementations"]
    ran = [f["detector"] for f in impl["findings"]]
    assert impl["not_run"] and not set(ran) & set(impl["not_run"])
    assert impl["summary"]["not_run"] == len(impl["not_run"])
    assert doc["summary"]["conformant"] is False and doc["deadline"] == 8
    lines = said(p.stderr).splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnzoo: deadline reached: the --deadline "
                                                   "of 8 s passed before")
    assert impl["not_run"][0] in lines[0]


def test_a_deadline_that_passes_while_loading_is_a_partial_report_too():
    p = attnzoo("check", f"{TARGETS}/slow_import.py", "--deadline", "1", *only("known_answers"),
                env=env(ATTNZOO_TEST_SECONDS=5))
    assert p.returncode == 4, p.stderr
    line, = said(p.stderr).splitlines()
    assert line.startswith("attnzoo: deadline reached: ") and "known_answers" in line


def test_deadline_with_flags_is_a_verdict():
    """A deadline with room for a loaded machine to start the worker and meet the hang."""
    p, doc = check(f"{TARGETS}/hangs.py", "--timeout", "1", "--deadline", "8")
    assert p.returncode == 1
    assert doc["implementations"][0]["not_run"]


# -- exit codes -----------------------------------------------------------------------------


@pytest.mark.parametrize("description", [
    {"kind": "zoo", "id": "x", "implementations": ["NUMPY"]},
    {"kind": "zoo", "id": "x", "implementations": {"cuda": "CUDA"}},
    {"kind": "zoo", "id": "x", "implementations": {"numpy": "os"}},
    {"kind": "zoo", "id": ["x"], "implementations": {"numpy": "NUMPY"}},
    {"kind": "zoo"},
    {"kind": "everything"},
    ["lesson"],
], ids=["list", "unknown-backend", "other-attribute", "id-not-text", "bare", "kind", "not-dict"])
def test_a_worker_that_misdescribes_its_module_is_a_bad_target(description):
    p = attnzoo("check", f"{TARGETS}/misdescribes.py", *only("known_answers"),
                env=env(ATTNZOO_TEST_DESCRIPTION=json.dumps(description)))
    assert "the worker sent no usable description: fix the module" in one_error_line(p)


def test_under_the_plugin_a_misdescribed_module_is_a_usage_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
                        f"--rootdir={tmp_path}", "--attnzoo-only", "known_answers",
                        "--attnzoo-target", str(REPO / TARGETS / "misdescribes.py")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env(ATTNZOO_TEST_DESCRIPTION='{"kind": "zoo"}'))
    assert p.returncode == pytest.ExitCode.USAGE_ERROR, p.stdout[-2000:] + p.stderr[-2000:]
    assert "INTERNALERROR" not in p.stdout + p.stderr and "Traceback" not in p.stderr
    assert "the worker sent no usable description" in p.stderr


def shell(line):
    """The exit status bash reports for ``line``, with "$0" the attnzoo console script."""
    done = subprocess.run(["bash", "-c", line, ATTNZOO], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return [int(code) for code in done.stdout.split()]


# five detectors: a document of more than 64 KiB, the pipe's capacity, so head makes it wait
FLAGGED = ('"$0" check zoo/mask_fill_zero.py --depth quick --no-shrink --json' + "".join(
    f" --only {d}" for d in ("known_answers", "causality", "matches_loop_oracle",
                             "weights_are_distributions", "output_is_weighted_values")))


@pytest.mark.parametrize("reader", ["head -c 10", "true"])
def test_a_reader_that_leaves_early_keeps_the_verdicts_exit_code(reader):
    assert shell(f'{FLAGGED} 2>/dev/null | {reader} >/dev/null; echo "${{PIPESTATUS[0]}}"') == [1]


def test_a_closed_stderr_or_stdout_is_no_fault():
    clean = '"$0" check reference/lesson_numpy.py --depth quick --only known_answers'
    bad = '"$0" check no/such/file.py'
    assert shell(f"{FLAGGED} 2>&- >/dev/null; echo $?; {FLAGGED} >&- 2>&-; echo $?; "
                 f"{clean} 2>&- >/dev/null; echo $?; {bad} 2>&-; echo $?") == [1, 1, 0, 2]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "expect.toml"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("expect, words", [
    ("/dev/zero", ["/dev/zero is not a regular file"]),
    ("{fifo}", ["expect.toml is not a regular file"]),
    ("{big}", ["big.toml is over 1024 KiB"]),
    ("{tmp}", ["is not a regular file"]),
], ids=["dev-zero", "fifo", "too-big", "folder"])
def test_an_expectations_file_is_a_regular_file_of_bounded_size(fifo, tmp_path, expect, words):
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (1 << 20) + "\n")
    expect = expect.format(fifo=fifo, big=big, tmp=tmp_path)
    line = one_error_line(attnzoo("check", "reference/lesson_numpy.py", "--expect", expect,
                                  timeout=60))
    assert all(w in line for w in words), line


def test_closed_socket_is_the_targets_fault():
    p, doc = check(f"{TARGETS}/closes_socket.py", *only("known_answers"), timeout=60)
    assert p.returncode in (1, 2)
    f, = findings(doc)
    assert f["verdict"] == "crashed" and "closed its connection" in f["message"]


@pytest.fixture
def odd_paths(tmp_path):
    (tmp_path / "notes.txt").write_text("attention = None\n")
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    (tmp_path / "a:b").mkdir()
    (tmp_path / "a:b" / "my.py").write_text("from reference.lesson_numpy import *  # noqa\n")
    return tmp_path


@pytest.mark.parametrize("argv, words", [
    (["reference/lesson_numpy.py", "--timeout", "1e12"], ["--timeout", "up to 86400", "1e+12"]),
    (["reference/lesson_numpy.py", "--import-timeout", "-1"], ["--import-timeout"]),
    (["reference/lesson_numpy.py", "--warmup", "nan"], ["--warmup"]),
    (["reference/lesson_numpy.py", "--deadline", "-1"], ["--deadline"]),
    (["torch.nn.functional:scaled_dot_product_attention", "--device", "meta"],
     ["--device meta", "no values", "--device cpu"]),
    (["reference/lesson_numpy.py", "--dtype", "bfloat16"],
     ["--dtype bfloat16", "NumPy has no bfloat16", "float32"]),
    (["{tmp}/notes.txt"], ["notes.txt is not a .py file", "point at a Python module"]),
    (["{tmp}/loop.py"], ["loop.py", "symlink loop", "real .py file"]),
    (["{tmp}/a:b/nope.py"], ["no such file", "a:b/nope.py"]),
], ids=["timeout-1e12", "import-timeout-negative", "warmup-nan", "deadline-negative",
        "device-meta", "bfloat16-numpy", "notes-txt", "symlink-loop", "colon-in-path"])
def test_bad_option_is_one_usage_error(odd_paths, argv, words):
    argv = [a.replace("{tmp}", str(odd_paths)) for a in argv]
    line = one_error_line(attnzoo("check", *argv))
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"


def test_notes_txt_in_the_current_folder_is_a_file(odd_paths):
    line = one_error_line(attnzoo("check", "notes.txt", cwd=odd_paths))
    assert "notes.txt is not a .py file" in line


def test_a_colon_in_a_folder_name_is_not_a_function(odd_paths):
    p, doc = check(f"{odd_paths}/a:b/my.py", *only("known_answers"))
    assert p.returncode == 0, p.stderr
    assert doc["implementations"][0]["target"]["locator"] == f"{odd_paths}/a:b/my.py"
