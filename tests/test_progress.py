"""Progress on stderr: detector, cases done of total, calls and elapsed time, in place on a
terminal, elsewhere a line per detector and at least one a minute; and a deadline that passes
while a failing case is being shrunk keeps the verdict found."""

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from attnzoo import shrink
from attnzoo.matrix.model import rows, subject_for
from attnzoo.progress import Progress
from attnzoo.runner import run
from attnzoo.sandbox.executor import DeadlineReached
from detectors import by_name
from detectors.kit.battery import Battery

REPO = Path(__file__).resolve().parents[1]
ATTNZOO = str(Path(sys.executable).with_name("attnzoo"))


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_names_the_detector_the_cases_and_the_time():
    out = Terminal()
    progress = Progress(out)
    progress.detector(2, 25, "causality")
    progress.case(0, 40, "tiles-past-one")
    progress.stage("shrinking tiles-past-one shrunk: rerun 3 of at most 40")
    progress.done()
    text = out.getvalue()
    assert "\r\x1b[K[2/25] causality: 0/40 cases (tiles-past-one), 0 calls, 0 s elapsed" in text
    assert "[2/25] causality: shrinking tiles-past-one shrunk: rerun 3 of at most 40" in text
    assert text.endswith("\r\x1b[K")  # the line is cleared before the report


def test_off_a_terminal_progress_is_a_line_per_detector_and_one_a_minute_however_long_a_call():
    out = io.StringIO()
    progress = Progress(out, every=0.3)  # a minute, scaled down
    progress.detector(1, 2, "causality")
    progress.case(0, 3, "a")
    progress.call()
    time.sleep(1.0)  # one long call: no hook of the run is called meanwhile
    progress.detector(2, 2, "known_answers")
    progress.done()
    time.sleep(0.5)
    lines = out.getvalue().splitlines()
    assert lines[0] == "attnzoo: [1/2] causality: 0 calls, 0 s elapsed"
    beats = [ln for ln in lines if ln.startswith("attnzoo: [1/2] causality: 0/3 cases (a), 1 ")]
    assert len(beats) >= 2, lines  # during the call, without a call to the progress
    assert lines[-1].startswith("attnzoo: [2/2] known_answers: 0 calls, ")
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_a_stderr_that_cannot_be_written_ends_the_progress_not_the_run():
    class Gone(io.StringIO):
        def write(self, text):
            raise BrokenPipeError()

    progress = Progress(Gone(), every=0.05)
    progress.detector(1, 1, "causality")
    time.sleep(0.2)
    assert progress.ended.is_set()
    progress.case(0, 3, "a")
    progress.done()


def test_a_subject_reports_each_case_it_iterates():
    seen = []
    row = next(r for r in rows() if r.kind == "reference" and r.backend == "numpy")
    subject = subject_for(row)
    subject.progress = SimpleNamespace(case=lambda done, total, name=None: seen.append(
        (done, total, name)))
    try:
        run(by_name()["output_is_weighted_values"], subject, Battery(0))
    finally:
        subject.progress = None
    total = seen[0][1]
    assert total > 10 and seen[0][0] == 0 and seen[-1] == (total, total, None)
    assert [d for d, _, _ in seen] == list(range(total + 1))  # every case, in order


def in_pty(argv):
    """(exit code, what a terminal shows) for argv run with a pty as stdout and stderr."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave)
    os.close(slave)
    output = b""
    while True:
        ready = select.select([master], [], [], 0.1)[0]
        if ready:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=120)
    os.close(master)
    return proc.returncode, output.decode("utf-8", "replace")


def test_check_shows_cases_done_of_total_on_a_terminal_and_a_line_per_detector_on_a_pipe():
    argv = [ATTNZOO, "check", "reference/lesson_numpy.py", "--depth", "quick",
            "--only", "output_is_weighted_values"]
    code, shown = in_pty(argv)
    assert code == 0, shown
    assert re.search(r"\[1/1\] output_is_weighted_values: \d+/\d+ cases \([\w-]+\), \d+ calls, "
                     r"\d+ s elapsed", shown), shown
    piped = subprocess.run(argv + ["--only", "known_answers"], cwd=REPO, capture_output=True,
                           text=True, timeout=120)
    lines = piped.stderr.splitlines()
    assert piped.returncode == 0 and len(lines) == 2, piped.stderr
    assert lines[0].startswith("attnzoo: [1/2] output_is_weighted_values: 0 calls, ")
    assert lines[1].startswith("attnzoo: [2/2] known_answers: 0 calls, ")


def test_a_deadline_during_shrinking_stops_it_and_keeps_the_verdict():
    row = next(r for r in rows("standard") if r.id == "key-tail-tile-dropped")
    oracle = by_name()["matches_loop_oracle"]

    def check(subject, battery):
        if len(battery.attention) == 1:  # a shrinking rerun: the deadline has passed
            raise DeadlineReached()
        oracle.check(subject, battery)

    detector = SimpleNamespace(NAME=oracle.NAME, NEEDS=oracle.NEEDS, check=check)
    finding = run(detector, subject_for(row), Battery(0, depth="standard"), shrink=True)
    assert finding.verdict == "killed"
    found = finding.evidence.shrunk
    assert found["attempts"] == 1 and "snippet" not in found and found["cap"] == shrink.MAX_ATTEMPTS
