"""Shrinking a failing case: the smallest case still fails the same property, at bounded cost.

Checked on the standard-depth zoo, where cases are large: a dropped tail tile shrinks to just
past one tile, every shrunk reproduction runs and shows the failure, the verdict is the one
found without shrinking, the cap on reruns holds, and correct code is never shrunk.
"""

import numpy as np
import pytest
import torch

from attnzoo import shrink
from attnzoo.matrix.model import rows, subject_for
from attnzoo.runner import run
from detectors import by_name
from detectors.kit.battery import Battery, materialise
from detectors.kit.sweep import STANDARD, deep
from reference import exact

STANDARD_BUGS = {r.label: r for r in rows("standard") if r.kind == "bug" and r.depth == "standard"}


@pytest.fixture(scope="module")
def battery():
    return Battery(0, depth="standard")


def shrunk(label, detector, battery):
    finding = run(by_name()[detector], subject_for(STANDARD_BUGS[label]), battery, shrink=True)
    return finding, finding.evidence.shrunk


def test_a_dropped_tail_tile_shrinks_to_just_past_one_tile(battery):
    finding, found = shrunk("key-tail-tile-dropped-sdpa", "matches_loop_oracle", battery)
    assert finding.verdict == "killed"
    assert found["sizes"]["S"] == 65  # one key past a tile of 64: the least length that fails
    assert found["sizes"]["L"] == found["sizes"]["E"] == found["sizes"]["Ev"] == 1
    assert found["from"].startswith("q (65, 24), k (130, 24)")
    assert found["to"] == "q (1, 1), k (65, 1), v (65, 1)"
    assert found["attempts"] <= shrink.MAX_ATTEMPTS


def as_numpy(x):
    return x.detach().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@pytest.mark.parametrize("label", ["key-tail-tile-dropped-sdpa", "split-kv-merge-ignores-sums-sdpa",
                                   "causal-offset-reset-per-chunk-sdpa",
                                   "head-dim-past-128-ignored-sdpa",
                                   "gqa-group-packed-by-four-sdpa"])
def test_the_smallest_reproduction_runs_and_disagrees_with_the_oracle(label, battery):
    finding, found = shrunk(label, "matches_loop_oracle", battery)
    assert finding.verdict == "killed" and found["snippet"], found
    code = found["snippet"]
    assert code.count("\n") < 40, code
    scope = {}
    exec(compile(code, "<snippet>", "exec"), scope)  # noqa: S102 - our own reproduction
    q, k, v = (as_numpy(scope[n]) for n in ("query1", "key2", "value3"))
    spec = next(c.spec for c in battery.attention if c.name == found["case"])
    assert spec.mask is None and spec.bias is None  # the cases these bugs fail on
    want = exact.attend(q, k, v, scale=spec.scale, causal="top-left" if spec.causal else None,
                        gqa=spec.gqa)[0]
    got = as_numpy(scope["r1"])
    assert got.shape == want.shape
    assert not np.allclose(got, want, atol=1e-6), "the smallest case no longer fails"
    assert q.size + k.size + v.size < 0.1 * sum(np.prod(s) for s in _shapes(found["from"]))


def _shapes(described):
    """The q, k, v shapes of ``q (2, 3), k (4, 3), v (4, 5)``."""
    parts = [p.split(" ", 1)[1] for p in described.split("), ")[:3]]
    return [tuple(int(n) for n in p.strip("()").split(",") if n.strip()) for p in parts]


@pytest.mark.parametrize("label,detector", [
    ("online-softmax-nan-after-masked-tiles-sdpa", "empty_rows_are_zero"),
    ("mask-3d-read-as-per-batch-sdpa", "matches_loop_oracle"),
    ("backward-rowsum-overwritten-per-tile-sdpa", "correct_gradients"),
])
def test_shrinking_keeps_the_verdict_and_the_message(label, detector, battery):
    plain = run(by_name()[detector], subject_for(STANDARD_BUGS[label]), battery)
    finding, found = shrunk(label, detector, battery)
    assert (finding.verdict, finding.message) == (plain.verdict, plain.message)
    assert plain.evidence.shrunk is None  # the kill matrix's runs do not shrink
    assert found["snippet"] and found["to"] != found["from"]
    assert found["message"].startswith(("expected", "f(")), found["message"]


def test_the_cap_on_reruns_holds(battery, monkeypatch):
    monkeypatch.setattr(shrink, "MAX_ATTEMPTS", 3)
    finding, found = shrunk("key-tail-tile-dropped-sdpa", "matches_loop_oracle", battery)
    assert finding.verdict == "killed"
    assert found["attempts"] == 3 and found["cap"] == 3


def test_correct_code_is_never_shrunk(battery):
    reference = next(r for r in rows("standard") if r.kind == "reference" and r.backend == "sdpa")
    finding = run(by_name()["matches_loop_oracle"], subject_for(reference), battery, shrink=True)
    assert finding.verdict == "survived" and finding.evidence is None


@pytest.mark.parametrize("spec", STANDARD + deep()[:12], ids=lambda s: s.name)
def test_every_knob_at_its_least_value_is_a_valid_call(spec):
    """Key, value and mask axes follow the query's: the oracle accepts each shrunk call."""
    for knob in shrink.sizes(spec):
        small = shrink.rebuilt(spec, {**shrink.sizes(spec), knob: shrink.least(spec, knob)})
        assert small.contracts == spec.contracts, (knob, small)
        call = materialise(small, [0, shrink.STREAM, 1])
        exact.attend(call.q, call.k, call.v, mask=call.mask, bias=call.bias, scale=call.scale,
                     causal="top-left" if call.causal else None, gqa=call.gqa)
        assert shrink.sizes(small)[knob] == shrink.least(spec, knob) or knob == "prefix"


def test_a_case_another_detector_shrank_starts_from_where_it_ended(battery):
    """Several detectors often flag one case: the second shrink starts from the first's
    smallest case (when it fails there too) and needs far fewer reruns."""
    shared = shrink.Shared(share=float("inf"))  # no time budget here: the cases alone
    row = subject_for(STANDARD_BUGS["key-tail-tile-dropped-sdpa"])
    first = run(by_name()["matches_loop_oracle"], row, battery, shrink=True, shared=shared)
    second = run(by_name()["low_precision_agreement"],
                 subject_for(STANDARD_BUGS["key-tail-tile-dropped-sdpa"]), battery, shrink=True,
                 shared=shared)
    a, b = first.evidence.shrunk, second.evidence.shrunk
    assert a["case"] == b["case"] and shared.cases[a["case"]].name.endswith(" shrunk")
    alone = run(by_name()["low_precision_agreement"],
                subject_for(STANDARD_BUGS["key-tail-tile-dropped-sdpa"]), battery,
                shrink=True).evidence.shrunk
    assert b["to"] == alone["to"] == a["to"]  # the same smallest case either way
    assert b["attempts"] < alone["attempts"]  # (8 against 18 on this case)


def test_shrinking_stops_when_the_checks_time_for_it_is_spent(battery):
    """A check's shrinks take at most a share of its detectors' own time: with none left, a
    flagged finding keeps its verdict and says why it was not shrunk further."""
    shared = shrink.Shared(share=0.0)
    finding = run(by_name()["matches_loop_oracle"],
                  subject_for(STANDARD_BUGS["key-tail-tile-dropped-sdpa"]), battery, shrink=True,
                  shared=shared)
    found = finding.evidence.shrunk
    assert finding.verdict == "killed" and shared.ran > 0
    assert found["attempts"] == 0 and found["to"] == found["from"]
    assert found["stopped"] == "the check's time for shrinking was spent"
