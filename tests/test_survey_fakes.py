"""Fake libraries through the survey: each behaviour a real library shows, and how it reads.

A documented convention is no finding; float32 internals for float64 inputs are one precision
finding at every size, never a semantic one; an undeclared refusal is one root cause, and a
declared one is set aside; a compile on each new shape costs time and nothing else. The fakes
live in tests/targets/survey/, each with its ``DECLARATION`` as an adapter has.
"""

import dataclasses
import runpy
from pathlib import Path

import numpy as np
import pytest

from attnzoo.survey import run, write

FAKES = Path(__file__).parent / "targets" / "survey"


def survey(name, depth="quick", budget=0, **declared):
    """One run of the fake ``name`` at ``depth``, float64, its declaration changed by
    ``declared``."""
    path = str(FAKES / f"{name}.py")
    decl = dataclasses.replace(runpy.run_path(path)["DECLARATION"], **declared)
    return run.run_one(path, decl, "float64", 0, depth=depth, budget=budget)


def flagged(one):
    return [f for f in one["findings"] if f["verdict"] in write.FLAGGED]


def test_a_declared_uniform_convention_is_no_finding():
    one = survey("uniform_rows")
    assert one["summary"]["flagged"] == 0 and one["summary"]["passed"] > 10, flagged(one)
    assert one["depth"] == "quick" and one["reached"]["tiers"]["quick"]


def test_the_same_convention_undeclared_is_flagged_as_empty_rows():
    one = survey("uniform_rows", empty_rows="zero", empty_rows_docs="")
    assert one["summary"]["flagged"] > 0
    assert "empty_rows_are_zero" in {f["detector"] for f in flagged(one)}
    causes = [g for g in one["diagnosis"] if g["feature"]]
    assert [g["feature"] for g in causes] == ["no_allowed_key"], one["diagnosis"]


def test_float32_internals_are_one_precision_finding_at_every_size():
    one = survey("float32_inside", depth="standard")  # past a tile: the error grows with S
    assert [f["detector"] for f in flagged(one)] == ["computes_at_input_precision"]
    (cause,) = one["diagnosis"]
    assert cause["feature"] == "dtype:float64" and cause["failing"] == 1, cause["sentence"]


@pytest.mark.parametrize("name, word, undeclared", [
    ("float32_inside", "float64=computed-in-float32", ["computes_at_input_precision"]),
    ("returns_float32", "float64=returned-as-float32",
     ["dtype_follows_input", "computes_at_input_precision"])])
def test_a_documented_float64_convention_declared_is_no_finding(name, word, undeclared):
    decl = runpy.run_path(str(FAKES / f"{name}.py"))["DECLARATION"]
    assert sorted(f["detector"] for f in flagged(survey(name))) == sorted(undeclared)
    one = survey(name, unsupported=decl.unsupported | {word},
                 float64_docs="https://example.invalid/docs#precision")
    assert flagged(one) == [] and one["summary"]["passed"] > 10, flagged(one)


def test_an_undeclared_refusal_is_one_root_cause_of_crashes():
    one = survey("refuses_gqa")
    assert one["summary"]["flagged"] > 0
    assert {f["verdict"] for f in flagged(one)} == {"crashed"}
    causes = [g for g in one["diagnosis"] if g["feature"]]
    assert len(causes) == 1 and "gqa" in causes[0]["features"], one["diagnosis"]


def test_a_declared_refusal_is_set_aside_case_by_case():
    message = runpy.run_path(str(FAKES / "refuses_gqa.py"))["MESSAGE"]
    one = survey("refuses_gqa", refuses=(message,))
    assert one["summary"]["flagged"] == 0, flagged(one)
    assert write.refused_cases(one) and all("gqa" in c for c in write.refused_cases(one))


@pytest.mark.parametrize("name", ["compiles_per_shape"])
def test_a_compile_on_each_new_shape_costs_time_and_nothing_else(name):
    delay = runpy.run_path(str(FAKES / f"{name}.py"))["DELAY"]
    one = survey(name, budget=600)
    assert one["summary"]["flagged"] == 0 and one["summary"]["hung"] == 0, flagged(one)
    warm = one["warmup"]
    # every compile falls in a first call of its shape, whose time goes back to the budget
    assert warm["seconds"] >= 5 * delay and 0 < warm["calls"] < one["summary"]["calls"], warm
    assert any(line.startswith("Warm-up: ") for line in write.warmup_lines(one))


class Worker:
    """An executor stand-in whose calls take ``seconds[shape]`` and whose worker can die."""

    def __init__(self, seconds):
        self.seconds, self.proc, self.deadline, self.colds = seconds, object(), 100.0, []

    def cold(self, fn):
        self.colds.append(fn)

    def run(self, request):
        import time

        time.sleep(self.seconds[np.shape(request.args[0])])
        return "answer"


def test_the_first_call_of_each_shape_is_given_back_to_the_budget_up_to_a_cap():
    from attnzoo.survey.warmup import PerShape
    from detectors.kit.calls import Request

    def call(n):
        return Request("sdpa", (np.zeros((1, 1, n, 2)),) * 3)

    worker = Worker({(1, 1, 2, 2): 0.05, (1, 1, 3, 2): 0.05})
    warm = PerShape(worker, cap=0.08)
    for n in (2, 2, 3, 3):
        assert warm.run(call(n)) == "answer"
    assert worker.colds == ["sdpa", "sdpa"]  # each new shape's call gets the warm-up limit
    assert warm.calls == 2 and 0.079 <= warm.seconds <= 0.08  # capped
    assert worker.deadline == pytest.approx(100.0 + warm.seconds)
    worker.proc = object()  # a new worker has compiled nothing: its first call warms again
    warm.cap = 1.0
    warm.run(call(2))
    assert warm.calls == 3 and worker.colds == ["sdpa"] * 3


def test_a_crash_left_by_earlier_calls_is_charged_to_them_and_stays_a_crash():
    one = survey("dies_after_masks")
    crashed = [f for f in flagged(one) if f["verdict"] == "crashed"]
    assert crashed and all("killed by SIGABRT" in f["message"] for f in crashed)
    causes = [g for g in one["diagnosis"] if g["feature"]]
    assert [g["features"] for g in causes] == [["after_earlier_calls"]], one["diagnosis"]
    assert "answers when sent alone to a fresh process" in causes[0]["sentence"]
    assert any("the same call answers" in f["message"] for f in crashed)


def test_a_crash_that_happens_alone_too_keeps_its_own_cause():
    one = survey("dies_on_one_query")
    crashed = [f for f in flagged(one) if f["verdict"] == "crashed"]
    assert crashed and all("killed by SIGABRT" in f["message"] for f in crashed)
    causes = [g for g in one["diagnosis"] if g["feature"]]
    assert [g["feature"] for g in causes] == ["single_query"], one["diagnosis"]
    again = [f for f in crashed if "dies again when sent alone to a fresh process" in f["message"]]
    assert again and not any("the same call answers" in f["message"] for f in crashed)
