"""A suite that leaves processes behind (for tests/test_grade_confine.py): a double-forked
daemon in a session of its own and a plain child, both ignoring SIGTERM and sleeping, their
command lines carrying ATTNZOO_TEST_MARKER; the run itself ignores SIGTERM too and names itself
by the marker. ATTNZOO_TEST_LINGER is how long the test then sleeps (0: it returns at once)."""
import ctypes
import os
import signal
import subprocess
import sys
import time

SLEEPER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"


def test_leaves_a_daemon_behind(attention):
    marker = os.environ.get("ATTNZOO_TEST_MARKER")
    assert marker, "run by tests/test_grade_confine.py only"
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctypes.CDLL(None).prctl(15, marker[:15].encode(), 0, 0, 0)  # PR_SET_NAME: its comm
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", SLEEPER, marker])
        os._exit(0)
    os.waitpid(first, 0)
    subprocess.Popen([sys.executable, "-c", SLEEPER, marker])
    time.sleep(float(os.environ.get("ATTNZOO_TEST_LINGER", "0")))
    assert attention.causal_mask(2).shape == (2, 2)
