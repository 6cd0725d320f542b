"""One ``attnzoo check`` run in the sandbox: its worker, its deadline and its progress line.

:func:`executor` installs the process hygiene (every exit path kills the worker's whole group)
and starts the worker with the time options and the isolation (saying on stderr when the
default fell back from strict to process); :func:`run_all` runs the detectors in order until
the deadline (or the first flag, with ``--exitfirst``), returning the findings and the names of
the detectors that did not run, so the report can say exactly what was and was not checked.
"""

import contextlib
import ctypes
import sys
import time

from attnzoo.sandbox import confine, hygiene
from attnzoo.sandbox.executor import DeadlineReached
from attnzoo.sandbox.isolated import Isolated


def executor(args, progress):
    """The worker for a check run, with its time options and isolation; hygiene installed
    first."""
    hygiene.install()
    if args.isolation_fallback:
        print(f"attnzoo: {fallback_line(args)}", file=sys.stderr)
    deadline = time.monotonic() + args.deadline if args.deadline else None  # 0: none
    return Isolated(call_seconds=args.timeout, load_seconds=args.import_timeout,
                    warmup_seconds=args.warmup, deadline=deadline, on_call=progress.call,
                    isolation=isolation(args))


def isolation(options):
    """The :class:`confine.Isolation` built options ask for."""
    return confine.Isolation(options.isolation, options.memory_limit, options.scratch_limit)


def fallback_line(options):
    return (f"isolation process, not strict: {options.isolation_fallback}; the code under "
            "test runs with your rights: your files, your processes, your network")


def isolation_words(options):
    """The report's line on the isolation in force."""
    level = options.isolation
    what = (confine.STRICT_WORDS if level == confine.STRICT else confine.PROCESS_WORDS)
    line = (f"isolation: {level}: {what}; memory {_size(options.memory_limit)}, scratch "
            f"{_size(options.scratch_limit)}")
    return line + (f" ({options.isolation_fallback})" if options.isolation_fallback else "")


def isolation_json(options):
    """The report's ``isolation`` object (docs/check-json.md)."""
    return {"level": options.isolation, "memory_limit": options.memory_limit,
            "scratch_limit": options.scratch_limit, "fallback": options.isolation_fallback}


def _size(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g}{unit}"
    return f"{n}B"


DEADLINE, FIRST_FLAG = "deadline", "first flag"  # why a run stopped before its last detector


def run_all(chosen, subject, battery, run, progress, offset=0, total=None, stop=None):
    """(findings, names not run, why they were not): the detectors in order, stopping at the
    deadline, or after a finding for which ``stop`` is true (``--exitfirst``)."""
    findings = []
    with one_blas_thread():
        for i, detector in enumerate(chosen):
            progress.detector(offset + i + 1, total or len(chosen), detector.NAME)
            try:
                findings.append(run(detector, subject, battery))
            except DeadlineReached:
                return findings, [d.NAME for d in chosen[i:]], DEADLINE
            if stop is not None and stop(findings[-1]) and chosen[i + 1:]:
                return findings, [d.NAME for d in chosen[i + 1:]], FIRST_FLAG
    return findings, [], None


# OpenBLAS's thread-count setters, by the names its builds export (NumPy's wheels prefix theirs)
_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")


@contextlib.contextmanager
def one_blas_thread():
    """Every OpenBLAS this process has loaded (NumPy's) on one thread while the detectors run,
    as the worker's torch is (``torch_backend.Torch``). The detectors' and oracles' products
    are small and many, the worker takes turns with this process, and the machine is often
    shared: a second BLAS thread spins waiting for work and, under load, made the
    low-precision detectors' NumPy several times slower. Where no OpenBLAS is found (another
    BLAS, no /proc), nothing changes."""
    found = _openblas()
    before = [get() for get, _ in found]
    for _, set_ in found:
        set_(1)
    try:
        yield
    finally:
        for (_, set_), n in zip(found, before):
            set_(n)


def _openblas():
    """[(get, set)] of the number of threads of each OpenBLAS mapped into this process."""
    import numpy  # noqa: F401 - loads its BLAS, which is then among the mapped files

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[-1].strip() for line in maps if "openblas" in line}
    except OSError:
        return []
    found = []
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            setter = getattr(lib, name, None)
            getter = getattr(lib, name.replace("set_num", "get_num"), None)
            if setter is not None and getter is not None:
                setter.argtypes, getter.restype = [ctypes.c_int], ctypes.c_int
                found.append((getter, setter))
                break
    return found
