"""One process per graded implementation, forked from a server that has already imported torch.

A fresh ``python -m pytest`` per implementation spent most of a grade importing numpy, torch,
pytest and the zoo again, some thirty times. Instead a :mod:`multiprocessing` fork server imports
them once (it runs no torch op, so no thread pool exists to be forked) and forks one child per
run. The child is still its own process: it makes itself the leader of a new session, takes the
environment, working directory, ``sys.path[0]`` and output file a ``python -m pytest`` there
would have had, sets torch to one thread, runs ``pytest.main`` and exits with its exit code. The
parent watches it through :class:`Child` (``poll``/``wait``/``pid``, as ``subprocess.Popen``) and
kills its whole group; nothing is read back from the child but its exit status, its output file
and the record file the plugin writes. Arguments go to the child only (pickled by the parent).
"""

import multiprocessing
import os
import subprocess
import sys
import threading

PRELOAD = ["numpy", "torch", "pytest", "_pytest.python", "_pytest.assertion.rewrite",
           "attnzoo.grade.fixtures", "attnzoo.sandbox.target", "reference", "zoo"]
SERVER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}

_lock = threading.Lock()
_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


def ensure_server():
    """Start the fork server (again, if something killed it) with one-thread BLAS and OpenMP."""
    from multiprocessing import forkserver

    with _lock:
        server = forkserver._forkserver  # noqa: SLF001 - the only way to ask if it is alive
        if server._forkserver_pid is not None:
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT  # ask, leave the reaping to it
            if os.waitid(os.P_PID, server._forkserver_pid, flags) is None:
                return
        saved = {k: os.environ.get(k) for k in SERVER_ENV}
        os.environ.update(SERVER_ENV)  # thread counts are fixed when numpy is imported
        try:
            forkserver.ensure_running()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class Child:
    """A forked pytest run, watched like a ``subprocess.Popen``."""

    def __init__(self, args, cwd, env, output):
        ensure_server()
        self.process = _context.Process(target=_main, args=(args, str(cwd), env, output),
                                         daemon=False)
        self.process.start()
        self.pid = self.process.pid

    def poll(self):
        return self.process.exitcode

    def wait(self, timeout=None):
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise subprocess.TimeoutExpired("pytest", timeout)
        return self.process.exitcode


def _main(args, cwd, env, output):
    """In the child: become the process a ``python -m pytest`` in ``cwd`` would have been."""
    os.setsid()  # own group: the parent's kill reaches everything this run starts
    from attnzoo.sandbox import hygiene

    hygiene.die_with_parent()
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(output, os.O_WRONLY | os.O_APPEND)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = env.get("PYTHONDONTWRITEBYTECODE") == "1"
    sys.path.insert(0, cwd)  # as `python -m` puts the working directory first
    sys.argv = ["pytest", *args]
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    import pytest

    code = pytest.main(list(args))
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(int(code))
