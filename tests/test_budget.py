"""``check --budget`` and ``--exitfirst``: the tiers in turn, the measured order, what was reached.

A gate must never overrun its budget by more than one call, must say what it did not reach,
and its order must come from measurement (``attnzoo bench --budgets``), naming only detectors
that exist.
"""

import json
import os
import time

import pytest
from test_cli import REPO, attnzoo

from attnzoo import budget
from attnzoo.checking import run_check
from attnzoo.devtools.budgets import greedy
from attnzoo.options import BadInput, Options
from attnzoo.progress import Progress
from detectors import all_detectors
from detectors.kit.battery import Battery
from detectors.kit.depths import DEPTHS
from detectors.kit.verdict import Finding

SDPA = "torch.nn.functional:scaled_dot_product_attention"


def names(battery):
    return [c.name for c in battery.attention + battery.self_attention]


def test_a_tier_started_deeper_holds_only_what_that_tier_adds():
    quick, whole = Battery(0, depth="quick"), Battery(0, depth="standard")
    added = Battery(0, depth="standard", start="standard")
    assert added.attention and not set(names(added)) & set(names(quick))
    assert sorted(names(quick) + names(added)) == sorted(names(whole))
    drawn = {c.name: c for c in whole.attention}
    for call in added.attention:  # drawn from the same streams as in the whole battery
        assert (call.q == drawn[call.name].q).all()


def test_the_units_follow_the_order_and_those_it_does_not_name_run_last():
    dets = all_detectors()
    order = {"sdpa": [[dets[-1].NAME, "standard"], [dets[0].NAME, "quick"],
                      [dets[1].NAME, "deep"]]}  # deep is past --depth standard: left out
    got = [(d.NAME, t) for d, t in budget.units(dets, "sdpa", "standard", order)]
    assert got[:2] == [(dets[-1].NAME, "standard"), (dets[0].NAME, "quick")]
    assert got[2:] == [(d.NAME, t) for t in ("quick", "standard") for d in dets
                       if (d.NAME, t) not in got[:2]]  # the rest: tier by tier, suite order
    assert len(got) == 2 * len(dets)
    assert [(d.NAME, t) for d, t in budget.units(dets, "lesson", "quick", order)] == \
        [(d.NAME, "quick") for d in dets]  # no order for it: the suite's


def test_greedy_takes_the_most_uncaught_rows_per_second_first():
    seconds = {"slow_wide": 1.0, "fast_narrow": 0.1, "other": 2.0, "idle": 0.5}
    caught = {"slow_wide": ["r1", "r2", "r3"], "fast_narrow": ["r1"], "other": ["r4"]}
    # fast_narrow: 10 rows/s; then slow_wide: 2 rows left in 1 s; other: 1 in 2 s; idle: none
    assert greedy(seconds, caught, {"r1", "r2", "r3", "r4"}) == \
        ["fast_narrow", "slow_wide", "other", "idle"]


def test_a_detectors_tiers_merge_into_the_first_that_flagged_it():
    quick = Finding("d", "t", "survived", "held", calls=3, seconds=1.0)
    deeper = Finding("d", "t", "killed", "wrong", calls=5, seconds=2.0)
    merged = budget.merge([("standard", deeper), ("quick", quick)])  # in the order they ran
    assert merged is deeper and merged.tiers == ["quick", "standard"]
    assert (merged.calls, merged.seconds) == (8, 3.0)
    for other in ("n/a", "unsupported"):  # a tier with nothing to check undoes nothing
        clean = budget.merge([("quick", Finding("d", "t", "survived", "held")),
                              ("standard", Finding("d", "t", other, "none apply"))])
        assert clean.verdict == "survived", other
    broken = budget.merge([("quick", Finding("d", "t", "survived", "held")),
                           ("standard", Finding("d", "t", "error", "detector error"))])
    assert broken.verdict == "error"  # a fault of attnzoo at any tier is never hidden


def test_the_committed_order_names_only_units_of_the_suite():
    doc = json.loads(budget.ORDER_FILE.read_text())
    suite = {d.NAME for d in all_detectors()}
    for contract, order in doc["order"].items():
        units = [tuple(u) for u in order]
        assert all(name in suite and tier in DEPTHS for name, tier in units), contract
        assert len(units) == len(set(units)), contract


def test_a_budgeted_check_runs_every_tier_and_says_what_it_reached():
    done = attnzoo("check", SDPA, "--budget", "600", "--json")
    doc = json.loads(done.stdout)
    impl = doc["implementations"][0]
    assert done.returncode == 0 and doc["budget"] == 600 and doc["deadline"] == 600
    tiers = impl["reached"]["tiers"]
    assert set(tiers["quick"]) == set(tiers["standard"]) == {
        f["detector"] for f in impl["findings"]}
    assert impl["reached"]["clauses_not_reached"] == [] and impl["unreached"] == {}
    assert 0 < impl["reached"]["values"] <= impl["reached"]["of"]
    assert all(f["tiers"] == ["quick", "standard"] for f in impl["findings"])


def test_a_budget_is_never_overrun_by_more_than_one_call(monkeypatch):
    monkeypatch.setenv("ATTNZOO_TEST_SECONDS", "0.5")
    options = Options.build(depth="standard", budget=4, timeout=2, warmup=2)
    start = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        sections, _, document, code = run_check(str(REPO / "tests/targets/slow.py"), options,
                                                progress=Progress(quiet))
    took = time.perf_counter() - start
    assert took <= 4 + 2 + 1.5, took  # the budget, one call's limit, the worker's teardown
    assert code == 4 and not document["summary"]["conformant"]
    assert sections[0]["not_run"] or sections[0]["unreached"]


def test_exitfirst_stops_at_the_first_flag_and_says_so():
    done = attnzoo("check", "zoo/scale_by_d_k.py", "-x", "--depth", "quick", "--no-shrink",
                   "--json")
    impl = json.loads(done.stdout)["implementations"][0]
    flagged = [f for f in impl["findings"] if f["verdict"] in ("killed", "nan", "crashed")]
    assert done.returncode == 1 and len(flagged) == 1 and flagged[0] == impl["findings"][-1]
    assert impl["stopped"] == "first flag" and impl["not_run"]
    assert "deadline" not in done.stderr


@pytest.mark.parametrize("extra, message", [
    (("--budget", "10", "--deadline", "10"), "give --budget or --deadline, not both"),
    (("--budget", "0"), "--budget must be a positive number of seconds"),
])
def test_a_bad_budget_is_one_line(extra, message):
    done = attnzoo("check", SDPA, *extra)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_options_refuse_a_budget_with_a_deadline():
    with pytest.raises(BadInput, match="not both"):
        Options.build(budget=5, deadline=5)


def test_a_budgeted_check_of_an_other_layout_reads_what_it_reached_in_sdpa_s():
    """What was reached is read off the calls in SDPA's (N, H, L, E), whatever layout the
    target declared; reading it never fails a detector."""
    done = attnzoo("check", "tests/targets/blhe_only.py:declared", "--budget", "600", "--json")
    impl = json.loads(done.stdout)["implementations"][0]
    assert done.returncode == 0 and impl["summary"]["errors"] == 0, done.stdout[-2000:]
    assert impl["reached"]["values"] > impl["reached"]["of"] // 2
