"""What a child forked by the worker server (:mod:`attnzoo.sandbox.zygote`) does to become a
worker or a pytest run.

:func:`become` turns the fresh fork into what ``python -m attnzoo.sandbox.worker FD`` (or
``python -m pytest ARGS``) started in the request's directory would be: its own session, no
terminal, stdin from /dev/null, unbuffered stdout and stderr into the pipe it was given, the
request's environment, its directory first on ``sys.path``, SIGKILL when the server dies, and
confined first when the request asks, its word on that sent to the server before anything else
runs. The server that forks it, and the parent's handle on it, are
:mod:`attnzoo.sandbox.zygote`.
"""

import io
import json
import os
import signal
import sys
import tempfile

from attnzoo.sandbox import confine, lifeline, worker

inherited = None  # in a pytest run: the descriptor its spec arrives on (attnzoo.grade.fixtures)


def become(request, fds, server_fds, said):
    """In the child: what ``python -m attnzoo.sandbox.worker FD`` (or ``python -m pytest
    ARGS``) in ``cwd`` would be, confined first if the request says so; its word on that goes
    to ``said``. Never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for f in server_fds:  # the server's socket object is closed, not only its number,
            if hasattr(f, "close"):  # so that nothing here can close a descriptor reusing it
                f.close()
            else:
                os.close(f)
        wire_fd, out_fd = fds
        os.setsid()
        lifeline.subreaper()  # what it orphans stays below it; once it ends, the server's
        lifeline.dumpable(True)  # as any process is: attnzoo reads its /proc entries
        lifeline.die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(null)
        os.close(out_fd)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True,
                                      errors="backslashreplace")
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # the server's cached /tmp: asked again, of the request's TMPDIR
        sys.path[0] = request["cwd"]
        if request.get("run") == "pytest":
            _confine_run(request.get("confine"), request.get("scope"), said)
            global inherited
            inherited = wire_fd  # the grade's spec comes on it: never argv, never environ
            code = _pytest(request["args"], request["env"])
        else:
            _confine(request.get("confine"), said)
            sys.argv = [worker.__file__, str(wire_fd)]
            worker.main(wire_fd)
            code = 0
    except SystemExit as e:  # as the interpreter reads it
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as an uncaught exception ends a python process
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code & 0xFF if isinstance(code, int) else 1)


def _confine(asked, said):
    """Raise the walls asked for, then say so (or why not) and close ``said`` before anything
    else runs; a child that could not be confined exits."""
    word = {}
    if asked:
        try:
            confine.apply(**asked)
            lifeline.die_with_parent()  # kept across the new user namespace; said again
            word = {"confined": asked["level"]}
        except OSError as e:
            word = {"unconfined": str(e)}
    os.write(said, json.dumps(word).encode())
    os.close(said)
    if "unconfined" in word:
        raise SystemExit(f"attnzoo: the worker could not be confined: {word['unconfined']}")


def _confine_run(asked, scope, said):
    """A graded pytest run: confined as asked (strict: the worker's walls, Landlock's scoping
    among them; process: the limits, then scoped when ``scope`` and the kernel allow), then its
    word on that; a run that could not be confined as asked exits."""
    word = {}
    try:
        if asked:
            confine.apply(**asked)
            word["confined"] = asked["level"]
        if asked and asked["level"] == confine.STRICT:
            word["scoped"] = True
        elif scope:
            try:
                confine.scope()
                word["scoped"] = True
            except OSError as e:
                word["unscoped"] = str(e)
        lifeline.die_with_parent()  # kept across a new user namespace; said again
    except OSError as e:
        word = {"unconfined": str(e)}
    os.write(said, json.dumps(word).encode())
    os.close(said)
    if "unconfined" in word:
        raise SystemExit(f"attnzoo: the graded run could not be confined: {word['unconfined']}")


def _pytest(args, env):
    sys.dont_write_bytecode = env.get("PYTHONDONTWRITEBYTECODE") == "1"
    sys.argv = ["pytest", *args]
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    import pytest  # only in a pytest child, never in the server before it forks

    return int(pytest.main(list(args)))

