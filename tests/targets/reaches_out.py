"""A wrong attention (its output doubled) that, at import and in every call, reaches for what
is outside its own processes: SIGKILL to its parent (the worker server), to the parent's process
group and to attnzoo itself (the server's parent), attnzoo's memory through /proc (a ptrace
access), the terminal at ATTNZOO_TEST_TTY by its path (as if it had found where attnzoo's
stdin leads), writing a line and turning its echo off, a TCP connection to
ATTNZOO_TEST_PORT on 127.0.0.1 and a connection to the Unix socket at ATTNZOO_TEST_SOCKET.

What was refused is printed; a test checks what got through by what it sees outside."""
import os
import signal
import socket
import termios

from reference import lesson_numpy
from reference.lesson_numpy import causal_mask, causal_self_attention, softmax  # noqa: F401


def _ppid(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def _terminal(fd):
    os.write(fd, b"WRITTEN-TO-TTY\n")
    attrs = termios.tcgetattr(fd)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


def attempt():
    server = os.getppid()
    attnzoo = _ppid(server)
    tries = {
        "kill attnzoo": lambda: os.kill(attnzoo, signal.SIGKILL),
        "kill the server's group": lambda: os.killpg(os.getpgid(server), signal.SIGKILL),
        "kill the server": lambda: os.kill(server, signal.SIGKILL),
        "read attnzoo's memory": lambda: os.close(os.open(f"/proc/{attnzoo}/mem", os.O_RDONLY)),
    }
    if os.environ.get("ATTNZOO_TEST_TTY"):
        tries["open the terminal"] = lambda: _terminal(
            os.open(os.environ["ATTNZOO_TEST_TTY"], os.O_RDWR | os.O_NOCTTY))
    if os.environ.get("ATTNZOO_TEST_PORT"):
        port = int(os.environ["ATTNZOO_TEST_PORT"])
        tries["connect over TCP"] = lambda: socket.create_connection(("127.0.0.1", port), 2)
    if os.environ.get("ATTNZOO_TEST_SOCKET"):
        def unix():
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(2)
            s.connect(os.environ["ATTNZOO_TEST_SOCKET"])
        tries["connect to a Unix socket"] = unix
    refused = []
    for what, act in tries.items():
        try:
            act()
        except OSError as e:
            refused.append(f"{what}: {type(e).__name__}")
    print(f"refused: {refused}", flush=True)


attempt()


def attention(Q, K, V, mask=None):
    attempt()
    out, weights = lesson_numpy.attention(Q, K, V, mask)
    return 2 * out, weights
