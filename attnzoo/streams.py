"""stdout and stderr as a command's exit code needs them: whatever became of them, the code is
the verdict's.

A stream closed before attnzoo started (``2>&-``) is opened on /dev/null; a reader that leaves
early (``--json | head -c 10``) costs the rest of the report, never the exit code; a line on a
stderr nobody reads is dropped.
"""

import os
import sys


def standard_streams():
    """A closed stdin, stdout or stderr (``2>&-``) is opened on /dev/null. Nothing attnzoo
    opens later then takes its number (a socket written to as if it were stderr), and a
    missing stderr is a stream that is not a terminal, not a None to fail on."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))


def say(line):
    """One line on stderr; a stderr whose reader has gone changes nothing else."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


def deliver(text, code):
    """Print ``text`` on stdout and return ``code``: a verdict's exit code is the same whether
    or not the reader of the report stayed to the end (``--json | head -c 10``)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        reader_gone()
    return code


def reader_gone():
    """stdout's reader has closed the pipe: what is still buffered goes to /dev/null, so that
    flushing it at exit neither fails nor changes the exit code."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)
