"""The diagnosis: one finding per root cause, from per-case outcomes of the flagged detectors.

The targets in tests/targets/root_causes.py have one root cause each (and one has two); each
must come out as one group naming the feature it breaks, with the detectors it involves; the
reference and a decoy get no diagnosis at all. The grouping rules are also tested on
hand-made outcomes, where the evidence is made to support a feature or not.
"""

import json
import re

import numpy as np
import pytest

from attnzoo.checking import run_check
from attnzoo.diagnosis import features
from attnzoo.diagnosis.group import UNEXPLAINED, diagnose
from attnzoo.options import Options
from attnzoo.report import text
from detectors.kit.battery import Battery
from detectors.kit.outcomes import MAX_FAILED

ROOT = "tests/targets/root_causes.py"
# every detector these causes involve, plus two they must not (a wide net keeps it honest:
# matches_loop_oracle runs every case, so a feature must explain the whole battery)
ONLY = ["known_answers", "matches_loop_oracle", "empty_rows_are_zero", "mask_poisoning",
        "gqa_head_mapping", "causal_alignment", "head_independence", "determinism"]


@pytest.fixture(scope="module")
def checked():
    cache = {}

    def check(locator):
        if locator not in cache:
            cache[locator] = run_check(locator, Options.build(only=ONLY, depth="quick"))
        return cache[locator]
    return check


@pytest.mark.parametrize("name, feature, involved", [
    ("finite_fill", "no_allowed_key", {"empty_rows_are_zero", "matches_loop_oracle"}),
    ("gqa_modulo", "gqa", {"gqa_head_mapping", "matches_loop_oracle", "head_independence"}),
    ("causal_ignores_rectangular", "is_causal_rectangular",
     {"causal_alignment", "matches_loop_oracle"}),
    ("gqa_crashes", "gqa", {"gqa_head_mapping", "matches_loop_oracle"}),
])
def test_one_root_cause_is_one_group(checked, name, feature, involved):
    sections, detectors, doc, code = checked(f"{ROOT}:{name}")
    section = sections[0]
    flagged = {f.detector for f in section["findings"] if f.caught}
    [group] = section["diagnosis"]
    assert group["feature"] == feature, group["sentence"]
    assert involved <= set(group["detectors"]) == flagged
    assert group["smallest"]["case"] in group["cases"]
    assert group["smallest"]["call"].startswith("f(query")
    assert group["passing_without"] > 0  # the evidence: cases without the feature pass
    assert features.phrase(feature) in group["sentence"]
    assert doc["implementations"][0]["diagnosis"] == [group]
    assert json.loads(json.dumps(doc))["implementations"][0]["diagnosis"][0]["feature"] == feature
    report = text(section, detectors).splitlines()
    assert report[1].startswith("diagnosis: 1 root cause (")
    assert features.phrase(feature) in report[2] and report[3].lstrip().startswith("smallest:")
    assert code == 1


def test_two_independent_causes_are_two_groups(checked):
    sections, _, _, _ = checked(f"{ROOT}:two_causes")
    groups = {g["feature"]: g for g in sections[0]["diagnosis"]}
    assert set(groups) == {"no_allowed_key", "gqa"}
    assert "empty_rows_are_zero" in groups["no_allowed_key"]["detectors"]
    assert "gqa_head_mapping" not in groups["no_allowed_key"]["detectors"]
    assert "gqa_head_mapping" in groups["gqa"]["detectors"]
    assert "empty_rows_are_zero" not in groups["gqa"]["detectors"]
    assert not set(groups["gqa"]["cases"]) & set(groups["no_allowed_key"]["cases"])


@pytest.mark.parametrize("locator", [f"{ROOT}:correct", "zoo/decoys/tiled_kernel.py"])
def test_reference_and_decoys_get_no_diagnosis(checked, locator):
    sections, detectors, doc, code = checked(locator)
    for section, impl in zip(sections, doc["implementations"]):
        assert section["diagnosis"] == [] == impl["diagnosis"]
        assert "diagnosis" not in text(section, detectors)
    assert code == 0


def test_following_a_flag_keeps_the_verdict_and_records_every_outcome(checked):
    from attnzoo.runner import run
    from attnzoo.sandbox.isolated import Isolated
    from attnzoo.sandbox.target import Target
    from detectors import by_name
    from detectors.kit.subject import Subject

    sections, _, _, _ = checked(f"{ROOT}:finite_fill")
    followed = {f.detector: f for f in sections[0]["findings"]}["matches_loop_oracle"]
    executor = Isolated()
    try:
        target = Target("ff", f"{ROOT}:finite_fill", "sdpa", "torch")
        executor.use(target)
        plain = run(by_name()["matches_loop_oracle"], Subject(target, executor),
                    Battery(0, depth="quick"))
    finally:
        executor.close()
    assert (plain.verdict, plain.evidence.case) == (followed.verdict, followed.evidence.case)
    assert not plain.cases  # only asked for: the kill matrix does not pay for it
    cases = followed.cases
    assert cases["complete"] and cases["stopped"] == "held"
    assert 1 < len(cases["failed"]) <= MAX_FAILED + 1 and cases["passed"]
    assert followed.evidence.case in cases["failed"]
    assert all("no_allowed_key" in r["features"] for r in cases["failed"].values())
    assert not set(cases["failed"]) & set(cases["passed"])


def test_features_come_from_the_spec_and_the_arrays_not_the_name():
    battery = Battery(0, depth="quick")
    by = {c.name: c for c in battery.attention}

    class Sent:  # the request fields the request table reads
        args, kwargs, grad, gradcheck, fn, dtype = (), {}, None, False, "sdpa", "float64"

    def of(call):
        return set(features.of(call, Sent(), "float64"))
    assert "gqa" in of(by["gqa-masked"]) and "strided" in of(by["gqa-masked"])
    assert "is_causal_rectangular" in of(by["causal-wide"])
    assert "is_causal_rectangular" not in of(by["causal-square"])
    assert "no_allowed_key" in of(by["batch-empty-rows"])
    assert "no_allowed_key" not in of(by["batch-key-padding"])
    renamed = by["gqa-masked"].with_(name="plain")
    assert of(renamed) == of(by["gqa-masked"])
    all_masked = by["heads-shared-mask"].with_(mask=by["heads-shared-mask"].mask & False)
    assert "no_allowed_key" in of(all_masked)
    standard = {c.name: c for c in Battery(0, depth="standard").attention}
    assert {"offset_inputs", "strided"} <= of(standard["inputs-at-an-offset"])
    shared = standard["shared-prefix-expanded"]
    assert {"expanded_inputs", "strided"} <= of(shared) and "offset_inputs" not in of(shared)
    rng = np.random.default_rng(0)  # a derived call with nothing shared: nothing expanded
    unshared = shared.with_(k=rng.standard_normal(shared.k.shape),
                            v=rng.standard_normal(shared.v.shape),
                            mask=rng.random(shared.mask.shape) < 0.7)
    assert "expanded_inputs" not in of(unshared) and "strided" in of(unshared)


def _finding(detector, failed, passed, complete=True):
    rec = lambda fs, size=10: {"features": fs, "size": size, "verdict": "killed",  # noqa: E731
                               "call": "f(...)", "message": "m", "snippet": ""}
    return {"detector": detector, "verdict": "killed", "message": "m",
            "cases": {"failed": {k: rec(fs) for k, fs in failed.items()},
                      "passed": {k: {"features": fs} for k, fs in passed.items()},
                      "complete": complete}}


def test_failures_two_features_account_for_make_two_groups():
    # a and b use gqa, c does not but is strided: two causes, each with cases without it passing
    found = diagnose([_finding("d", {"a": ["gqa"], "b": ["gqa", "strided"], "c": ["strided"]},
                               {"p": ["scale"]})])
    assert [(g["feature"], g["cases"]) for g in found] == [("gqa", ["a", "b"]),
                                                            ("strided", ["c"])]


def test_without_a_passing_case_lacking_it_a_feature_is_not_named():
    found = diagnose([_finding("d", {"a": ["gqa"], "b": ["gqa"]}, {"p": ["gqa"]})])
    [group] = found
    assert group["feature"] is None and group["explains"] == UNEXPLAINED
    assert group["sentence"].startswith("No single feature explains these: 2 failing cases "
                                        "(2 killed) in d")


def test_a_detector_left_incomplete_alone_is_no_evidence():
    found = diagnose([_finding("d", {"a": ["gqa"]}, {}, complete=False)])
    assert [g["feature"] for g in found] == [None]


def test_a_failing_case_without_the_feature_unexplained_elsewhere_breaks_the_group():
    # detector d fails a gqa case and a case with no feature at all: gqa does not explain d
    found = diagnose([_finding("d", {"a": ["gqa"], "b": []}, {"p": ["scale"]})])
    assert [g["feature"] for g in found] == [None]
    assert found[0]["cases"] == ["a", "b"]


def test_one_cause_in_two_detectors_is_one_group_and_the_smallest_case_is_shown():
    found = diagnose([
        _finding("d1", {"big": ["gqa", "strided"]}, {"p": ["strided"], "q": []}),
        _finding("d2", {"small": ["gqa"]}, {"r": ["scale"]}),
    ])
    found[0]["cases"].sort()
    [group] = found
    assert group["feature"] == "gqa" and group["detectors"] == ["d1", "d2"]
    assert group["cases"] == ["big", "small"] and group["passing_without"] == 3


def test_a_defect_needing_two_features_is_named_by_both():
    # fails only where a mask meets float16: neither feature alone explains it
    found = diagnose([_finding("d", {"a": ["any_mask", "dtype:float16"],
                                     "b": ["any_mask", "dtype:float16", "gqa"]},
                               {"p": ["any_mask"], "q": ["dtype:float16"], "r": []})])
    [group] = found
    assert group["features"] == ["dtype:float16", "any_mask"] or \
        group["features"] == ["any_mask", "dtype:float16"]
    assert "float16 inputs" in group["sentence"] and "together with" in group["sentence"]


def test_a_narrower_group_joins_the_broader_one_it_refines():
    # d1 fails every bool-mask case; d2 only those that also have an empty row: one cause
    found = diagnose([
        _finding("d1", {"a": ["bool_mask"], "b": ["bool_mask", "no_allowed_key"]},
                 {"p": ["float_mask"]}),
        _finding("d2", {"b": ["bool_mask", "no_allowed_key"], "c": ["bool_mask", "no_allowed_key"]},
                 {"a": ["bool_mask"], "x": ["bool_mask"], "y": ["bool_mask"],
                  "q": ["float_mask", "no_allowed_key"]}),
    ])
    [group] = found
    assert group["feature"] == "bool_mask" and group["detectors"] == ["d1", "d2"]
    assert group["refined"] == [{"features": ["no_allowed_key", "bool_mask"],
                                 "detectors": ["d1", "d2"], "failing": 3}]
    assert "3 of them, in d1, d2, fail only where they also use rows with no allowed key" in \
        group["sentence"]


def test_check_without_following_has_no_diagnosis_and_the_same_verdict(checked):
    options = Options.build(only=["empty_rows_are_zero"], depth="quick", follow=False)
    sections, _, doc, code = run_check(f"{ROOT}:finite_fill", options)
    [finding] = sections[0]["findings"]
    followed = {f.detector: f for f in checked(f"{ROOT}:finite_fill")[0][0]["findings"]}
    assert finding.message == followed["empty_rows_are_zero"].message
    assert finding.cases == {} and sections[0]["diagnosis"] == [] == \
        doc["implementations"][0]["diagnosis"]
    assert code == 1


def test_a_precision_finding_is_one_group_named_for_its_dtype():
    """A softmax run in float32 is one finding about float64 inputs, not an unexplained one:
    the precision detector declares CAUSE = "dtype", so its cases carry their dtype alone and
    stand as their own evidence."""
    options = Options.build(depth="quick",
                            only=["computes_at_input_precision", "matches_loop_oracle"])
    sections, _, _, _ = run_check("tests/targets/softmax_float32.py:sdpa", options)
    [group] = sections[0]["diagnosis"]
    assert group["feature"] == "dtype:float64" and group["explains"] == "float64 inputs"
    assert group["detectors"] == ["computes_at_input_precision"]
    assert "float64 inputs computed to float32 accuracy" in group["smallest"]["message"]


def test_a_declared_cause_is_its_own_evidence_and_only_for_its_detector():
    declared = _finding("precision", {"heads": ["dtype:float64"]}, {})
    declared["cases"]["cause"] = "dtype"
    [group] = diagnose([declared])
    assert group["feature"] == "dtype:float64" and "precision" in group["sentence"]
    undeclared = _finding("precision", {"heads": ["dtype:float64"]}, {})
    assert [g["feature"] for g in diagnose([undeclared])] == [None]


def test_a_case_a_detector_names_at_the_runs_own_dtype_keeps_its_features():
    """Under --dtype float32, "heads-empty-rows at float32" is the case "heads-empty-rows": its
    failure is grouped with the other detectors' rows with no allowed key."""
    options = Options.build(depth="quick", dtype="float32",
                            only=["low_precision_agreement", "empty_rows_are_zero"])
    sections, _, _, _ = run_check(f"{ROOT}:finite_fill", options)
    [group] = sections[0]["diagnosis"]
    assert group["feature"] == "no_allowed_key", group["sentence"]
    assert "low_precision_agreement" in group["detectors"]
    assert not any(c.endswith(" at float32") for c in group["cases"])


def test_a_crash_found_on_a_rerun_keeps_its_call(checked):
    """Every failing case a rerun finds names its call, crashes included, so a group whose
    smallest case crashed still shows the call that does it."""
    sections, _, _, _ = checked(f"{ROOT}:gqa_crashes")
    crashed = [r for f in sections[0]["findings"] for r in (f.cases or {}).get("failed", {})
               .values() if r["verdict"] == "crashed"]
    assert len(crashed) > 1
    assert all(r["call"].startswith("f(query") for r in crashed), crashed


def test_a_dtype_that_does_not_come_back_is_one_group_named_for_it():
    """float64 in, float32 out: dtype_follows_input and the precision measurement both declare
    their failures a finding about the dtype, so the report has one cause, "float64 inputs"."""
    options = Options.build(depth="quick", only=["dtype_follows_input",
                                                 "computes_at_input_precision",
                                                 "matches_loop_oracle"])
    sections, _, _, _ = run_check(f"{ROOT}:float64_as_float32", options)
    flagged = {f.detector for f in sections[0]["findings"] if f.caught}
    assert flagged == {"dtype_follows_input", "computes_at_input_precision"}
    [group] = sections[0]["diagnosis"]
    assert group["feature"] == "dtype:float64"
    assert set(group["detectors"]) == flagged


def test_equally_good_candidates_are_chosen_by_specificity_not_by_set_order():
    # the failing cases are causal decode steps; a tall causal case and a plain decode step
    # pass, so (is_causal_rectangular, single_query) and (is_causal, single_query) explain
    # them equally well: the more specific pair is named, whatever a set's order
    feats = ["is_causal_rectangular", "is_causal", "single_query"]
    found = diagnose([_finding("d", {"a": feats, "b": feats[::-1]},
                               {"tall": ["is_causal_rectangular", "is_causal"],
                                "decode": ["single_query"]})])
    assert found[0]["features"] == ["is_causal_rectangular", "single_query"]


def test_a_crash_in_a_dtype_detector_is_read_by_its_case_not_its_dtype():
    """keras-numpy's grouped-query call crashes in dtype_follows_input too: that crash belongs
    with the GQA group, not to "float32 inputs"."""
    options = Options.build(depth="quick", only=["dtype_follows_input", "gqa_head_mapping"])
    sections, _, _, _ = run_check(f"{ROOT}:gqa_crashes", options)
    [group] = sections[0]["diagnosis"]
    assert group["feature"] == "gqa" and "dtype_follows_input" in group["detectors"]


def test_the_root_causes_smallest_call_is_the_shrunk_one():
    """Each flagged detector shrinks its first failing case; a root cause whose cases include
    it names the smallest call a shrink reached, beside the battery's smallest case."""
    from tests.test_cli import attnzoo

    done = attnzoo("check", "tests/targets/naive_sdpa.py:sdpa", "--depth", "quick", "--json")
    (cause,) = json.loads(done.stdout)["implementations"][0]["diagnosis"]
    shrunk = cause["smallest"]["shrunk"]
    assert shrunk["from"] in cause["cases"] and shrunk["detector"] in cause["detectors"]
    assert shrunk["call"].startswith("f(query (1, 1, ") and shrunk["call"] != \
        cause["smallest"]["call"], shrunk
    # the text of a second run: a shrink is time-limited, so under load it may stop at another
    # call as small; the line names one of the root cause's cases and detectors all the same
    text = attnzoo("check", "tests/targets/naive_sdpa.py:sdpa", "--depth", "quick").stdout
    said = re.search(r"^ {5}shrunk from case (.+) \((\w+)\): (f\(query \(1, 1, .*)$", text,
                     re.MULTILINE)
    assert said and said[1] in cause["cases"] and said[2] in cause["detectors"], text


def _spec_finding(detector, failed, passed):
    """Failing cases as (spec, features), so that a detector's variant names its battery case."""
    out = _finding(detector, {k: fs for k, (_, fs) in failed.items()}, passed)
    for k, (spec, _) in failed.items():
        out["cases"]["failed"][k]["spec"] = spec
    return out


def test_a_variant_of_an_explained_case_joins_its_cause_and_later_causes_say_so():
    """Ev ≠ E refused explains the first detector's failures; the second detector's variant of
    one of those cases (every key masked) fails too and no feature of its own explains it: it
    joins Ev ≠ E rather than reading as a second, unexplained cause. The strided case is a
    cause of its own, found among what Ev ≠ E leaves."""
    ev = {f"ev#{i}": (f"ev#{i}", ["e_ne_ev"]) for i in range(6)}
    first = _spec_finding("d1", {**ev, "s": ("s", ["strided"])},
                          {"p": ["scale"], "q": ["gqa"]})
    second = _spec_finding("d2", {"ev#0 (all masked)": ("ev#0", ["no_allowed_key"])},
                           {"p (all masked)": ["no_allowed_key"]})
    found = diagnose([first, second])
    assert [g["feature"] for g in found] == ["e_ne_ev", "strided"], found
    cause = found[0]
    assert "ev#0 (all masked)" in cause["cases"] and cause["detectors"] == ["d1", "d2"]
    assert cause["failing"] == 7 and cause["variants"] == 1
    assert "a variant a detector made of such cases" in cause["sentence"]
    assert found[1]["sentence"].startswith("Of the 1 failing case left after ")
    assert not any(g["explains"] == UNEXPLAINED for g in found)


def test_without_the_spec_the_variant_stays_unexplained():
    """The same outcomes with no battery case named: nothing ties the variant to Ev ≠ E."""
    ev = {f"ev#{i}": ["e_ne_ev"] for i in range(6)}
    found = diagnose([_finding("d1", ev, {"p": ["scale"]}),
                      _finding("d2", {"ev#0 (all masked)": ["no_allowed_key"]},
                               {"p (all masked)": ["no_allowed_key"]})])
    assert found[-1]["explains"] == UNEXPLAINED and found[-1]["cases"] == ["ev#0 (all masked)"]
