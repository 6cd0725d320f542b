"""Side effects a comparison of bytes right after the call cannot see (C7).

A write into an input put back before the call returns leaves the bytes as they were: read-only
NumPy inputs and torch's version counters see it (tests/targets/writes_and_restores.py scales
its query, or softmax's x, in place and back). An answer a background thread changes a moment
after the call returned reads unchanged by the calls right after it: past quick, kept answers
are read once more a moment later (tests/targets/changes_after_return.py). An answer in a ring
of output buffers changes only after many calls: each worker's first answers are read again
when it ends (tests/targets/ring_of_outputs.py)."""

import json

import pytest

from attnzoo.runner import run
from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.target import Target, load
from detectors import answers_stay_as_returned as stays
from detectors import by_name
from detectors.input_immutability import GUARDED
from detectors.kit.battery import Battery
from detectors.kit.subject import Subject
from tests.test_cli import attnzoo

DETECTOR = by_name()["input_immutability"]
TARGET = "tests/targets/writes_and_restores.py"
LATER = "tests/targets/changes_after_return.py"
stays_detector = by_name()["answers_stay_as_returned"]


def finding(locator, contract, backend, detector=DETECTOR):
    target = Target(locator, locator, contract, backend)
    return run(detector, Subject(target, InProcess(target, obj=load(locator))), Battery(0))


@pytest.mark.parametrize("locator, contract, backend, name", [
    (TARGET, "lesson", "numpy", "x"),  # softmax is judged before attention
    (f"{TARGET}:sdpa", "sdpa", "torch", "query"),
], ids=["numpy-read-only", "torch-version-counter"])
def test_a_write_put_back_is_flagged_and_named(locator, contract, backend, name):
    f = finding(locator, contract, backend)
    assert f.verdict == "killed", f.message
    assert f"expected {name} left unchanged ({GUARDED}), got {name} modified by the call" \
        in f.message, f.message


@pytest.mark.parametrize("locator, contract, backend", [
    ("reference.lesson_numpy", "lesson", "numpy"),
    ("reference.lesson_torch", "lesson", "torch"),
    ("torch.nn.functional:scaled_dot_product_attention", "sdpa", "torch"),
], ids=["numpy", "torch-lesson", "sdpa"])
def test_correct_code_is_clean_with_guarded_inputs(locator, contract, backend):
    f = finding(locator, contract, backend)
    assert f.verdict == "survived", f.message


def test_the_worker_sees_the_version_counter_move():
    done = attnzoo("check", f"{TARGET}:sdpa", "--only", "input_immutability", "--depth", "quick",
                   "--json")
    assert done.returncode == 1, done.stderr
    (impl,) = json.loads(done.stdout)["implementations"]
    (cell,) = impl["findings"]
    assert cell["verdict"] == "killed" and "query modified by the call" in cell["message"], cell


@pytest.mark.parametrize("locator", [f"{TARGET}:sdpa", TARGET], ids=["torch", "numpy"])
def test_the_standalone_reproduction_sees_the_undone_write(locator, tmp_path):
    done = attnzoo("check", locator, "--only", "input_immutability", "--depth", "quick",
                   "--repro-dir", str(tmp_path))
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stdout.splitlines() if "reproduction: " in line]
    assert lines and all(line.endswith("(reproduces)") for line in lines), done.stdout


def test_an_answer_changed_a_moment_after_returning_is_read_again_later(monkeypatch):
    """The target changes each answer 0.75 s after returning it; the quick battery's calls
    after it take milliseconds, so only the late reading (made 1.5 s on here) can see it."""
    monkeypatch.setattr(stays, "LATE", {"quick": 1.5})
    monkeypatch.setenv("ATTNZOO_TEST_CHANGE_AFTER", "0.75")
    f = finding(f"{LATER}:sdpa", "sdpa", "torch", stays_detector)
    assert f.verdict == "killed", f.message
    assert "(exactly; they differ by" in f.message and "read again 1.5 s later" in f.message, \
        f.message


def test_no_late_reading_at_quick():
    assert "quick" not in stays.LATE  # the kill matrix's tier pays no wait


def test_an_answer_overwritten_many_calls_later_is_read_at_the_end_of_the_run():
    done = attnzoo("check", "tests/targets/ring_of_outputs.py:sdpa", "--depth", "quick",
                   "--json")
    impl = json.loads(done.stdout)["implementations"][0]
    flagged = {f["detector"]: f for f in impl["findings"] if f["verdict"] == "killed"}
    assert done.returncode == 1 and set(flagged) == {"answers_stay_as_returned"}, flagged
    assert "read again when its worker ended" in flagged["answers_stay_as_returned"]["message"]


def test_the_end_of_run_reading_flags_nothing_in_correct_code():
    done = attnzoo("check", "torch.nn.functional:scaled_dot_product_attention", "--depth",
                   "quick", "--only", "answers_stay_as_returned", "--only", "determinism",
                   "--json")
    assert done.returncode == 0, done.stdout[-2000:]
