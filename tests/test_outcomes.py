"""One run per case: a flagged detector runs each of its cases once, records every outcome and
keeps its first failure as the verdict; a refused case costs no rerun; a shrink step that
cannot build its smaller case is skipped."""

import pytest

from attnzoo import shrink
from attnzoo.matrix.model import rows, subject_for
from attnzoo.runner import run
from detectors import by_name
from detectors.kit.battery import Battery
from detectors.kit.outcomes import CaseId, Record, Stop
from detectors.kit.verdict import HUNG, KILLED, Flag, ImplementationFailure

ROWS = {r.label: r for r in rows("standard")}


@pytest.fixture(scope="module")
def battery():
    return Battery(0, depth="quick")


def test_a_flagged_detector_makes_the_calls_a_clean_one_does(battery):
    """The reference and a bug that fails many cases make the same calls: nothing is rerun."""
    detector = by_name()["matches_loop_oracle"]
    clean = run(detector, subject_for(ROWS["reference-sdpa"]), battery, cases=True)
    flagged = run(detector, subject_for(ROWS["no-scaling-sdpa"]), battery, cases=True)
    assert clean.verdict == "survived" and flagged.verdict == KILLED
    assert flagged.calls == clean.calls
    failed, passed = flagged.cases["failed"], flagged.cases["passed"]
    assert len(failed) > 1 and passed and not set(failed) & set(passed)
    assert flagged.cases["complete"]


def test_the_verdict_is_the_first_failure_whether_or_not_outcomes_are_kept(battery):
    detector = by_name()["matches_loop_oracle"]
    only = run(detector, subject_for(ROWS["no-scaling-sdpa"]), battery)
    every = run(detector, subject_for(ROWS["no-scaling-sdpa"]), battery, cases=True)
    assert (only.verdict, only.message) == (every.verdict, every.message)
    assert only.calls < every.calls and not only.cases


def test_case_ids_read_a_variant_and_a_dtype_and_print_as_before():
    assert str(CaseId.of("heads (all masked)", "float32", "float64", within="heads")) == \
        "heads (all masked) at float32"
    case = CaseId.of("heads (all masked)", "float32", "float64", within="heads")
    assert (case.spec, case.variant, case.dtype) == ("heads", " (all masked)", "float32")
    assert CaseId.of("heads at float64", "float64", "float64") == CaseId("heads")
    assert CaseId.of("heads at float16", None, "float64") == CaseId("heads", "", "float16")
    assert CaseId.of("other", None, "float64", within="heads") == CaseId("other")


def test_a_record_stops_after_a_hang_and_when_enough_cases_failed():
    def outcome(verdict):
        from detectors.kit.outcomes import Outcome
        return Outcome(verdict, "m", None, ImplementationFailure(verdict, "w", "c"))

    record = Record("d", keep_going=True)
    record.fail(CaseId("a"), outcome(KILLED))
    with pytest.raises(Stop):
        record.fail(CaseId("b"), outcome(HUNG))
    assert record.stopped == "a hang" and list(record.failed) == [CaseId("a"), CaseId("b")]
    first_only = Record("d")
    with pytest.raises(ImplementationFailure):
        first_only.fail(CaseId("a"), outcome(KILLED))


def test_a_trial_records_a_failure_and_the_next_case_still_runs(battery):
    subject = subject_for(ROWS["reference-sdpa"])
    subject.run = Record("probe", keep_going=True)
    ran = []
    for name in ("one", "two"):
        with subject.trial(name):
            ran.append(name)
            if name == "one":
                from detectors.kit.expect import fail
                with subject.case(name):
                    fail("something", "something else")
    assert ran == ["one", "two"]
    assert list(subject.run.failed) == [CaseId("one")]
    assert isinstance(subject.run.first.error, Flag)


def test_a_refused_case_is_set_aside_without_a_rerun(battery):
    from detectors.kit.verdict import Unsupported

    subject = subject_for(ROWS["reference-sdpa"])
    subject.run = Record("probe", keep_going=False)
    ran = []
    for name in ("one", "two"):
        with subject.trial(name):
            if name == "one":
                raise Unsupported(name, "refused: no")
            ran.append(name)
    assert ran == ["two"] and subject.set_aside == {"one": "refused: no"}


def test_a_shrink_step_that_cannot_build_its_case_is_skipped(monkeypatch):
    """A float mask with empty rows needs two query rows; a step that cannot be drawn is
    skipped, and the verdict already reached stands."""
    battery = Battery(0, depth="quick")
    start = next(c for c in battery.attention if c.spec.bias == "empty-rows")
    assert shrink.least(start.spec, "L") == 2
    detector = by_name()["matches_loop_oracle"]
    subject = subject_for(ROWS["no-scaling-sdpa"])
    shrinker = shrink.Shrinker(detector, subject, battery, KILLED)

    def broken(*args, **kw):
        raise IndexError("index 1 is out of bounds for axis 1 with size 1")
    monkeypatch.setattr(shrink, "materialise", broken)
    assert shrinker.fails(start.spec) is False
    assert shrinker.skipped and "IndexError" in shrinker.skipped[0]
    found = shrink.smallest(detector, subject, battery, start.name, KILLED)
    assert found["to"] == found["from"] and found["unbuilt"]
