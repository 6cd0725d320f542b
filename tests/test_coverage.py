"""Coverage from the contract: every value of the input space (reference/space.py) is reached
at deep by a forward relation and a gradient relation, or says why not; coverage is read off
the calls actually sent, so a renamed case or detector changes nothing."""

import numpy as np
import pytest

from attnzoo import coverage, space_values
from detectors.kit.calls import Request
from reference.space import SPACES


def sdpa(q, k, v, dtype="float64", **kw):
    return Request("sdpa", (np.ones(q), np.ones(k), np.ones(v)), kw, dtype=dtype)


def test_sizes_are_read_from_the_arrays_sent():
    found = space_values.sdpa_values(sdpa((1, 2, 65, 33), (1, 2, 127, 33), (1, 2, 127, 8),
                                      is_causal=True))
    assert {("L", "2^k+1"), ("L", ">64"), ("S", "prime"), ("S", "2^k-1"), ("E", "2^k+1"),
            ("Ev", "!=E"), ("is_causal", "L<S"), ("batch", "1"), ("heads", ">1")} <= found
    assert ("L", "prime") not in found and ("E", ">128") not in found


def test_masks_dropout_scale_and_requests_are_read_from_the_keywords():
    mask = np.full((4, 5), -np.inf)
    mask[1:, 0] = 0.0  # row 0 has no allowed key
    found = space_values.sdpa_values(sdpa((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), attn_mask=mask,
                                      dropout_p=0.95, scale=0.0))
    assert {("attn_mask", "float"), ("attn_mask", "float -inf"), ("attn_mask", "2-D"),
            ("attn_mask", "empty row"), ("dropout_p", ">=0.9"), ("scale", "0")} <= found
    asked = Request("sdpa", (np.ones((1, 1, 2, 2)),) * 3, {}, seed=3, keep=True)
    assert {("requests", "seeded"), ("requests", "kept")} <= space_values.sdpa_values(asked)


def test_grouped_heads_and_score_magnitudes():
    q, k = np.full((1, 8, 3, 4), 200.0), np.full((1, 1, 3, 4), 200.0)
    r = Request("sdpa", (q, k, np.ones((1, 1, 3, 4))), {"enable_gqa": True})
    assert {("gqa", "mqa"), ("scores", "past float16")} <= space_values.sdpa_values(r)


def test_format_limits_are_read_per_dtype():
    v = np.full((1, 1, 3, 4), 40000.0)
    near = Request("sdpa", (np.ones((1, 1, 300, 4)), np.ones((1, 1, 3, 4)), v), {},
                   dtype="float16")
    assert ("limits", "largest finite") in space_values.sdpa_values(near)
    assert ("limits", "past exact integers") not in space_values.sdpa_values(near)  # 300 < 2048
    at_bf16 = Request("sdpa", near.args, {}, dtype="bfloat16")
    assert ("limits", "past exact integers") in space_values.sdpa_values(at_bf16)
    assert ("limits", "largest finite") not in space_values.sdpa_values(at_bf16)
    tiny = Request("sdpa", (np.full((1, 1, 2, 2), 1e-6),) * 3, {}, dtype="float16")
    assert ("limits", "smallest normal") in space_values.sdpa_values(tiny)


def test_a_call_repeated_at_once_or_later_is_read_off_the_sequence():
    a, b = (sdpa((1, 1, 2, 2), (1, 1, 2, 2), (1, 1, 2, 2)),
            sdpa((1, 1, 3, 2), (1, 1, 3, 2), (1, 1, 3, 2)))
    again = sdpa((1, 1, 2, 2), (1, 1, 2, 2), (1, 1, 2, 2))  # equal values, new objects
    places = space_values.sequence([a, again, b, a, b])
    assert places[0] == set() and places[2] == set()
    assert places[1] == {("requests", "repeated")}
    assert places[3] == {("requests", "repeated later")} == places[4]
    scaled = sdpa((1, 1, 2, 2), (1, 1, 2, 2), (1, 1, 2, 2), scale=0.5)  # another keyword
    assert space_values.sequence([a, scaled]) == [set(), set()]


def test_the_layout_and_per_head_masks_are_read_from_the_arrays_sent():
    """An expansion counts where an array has an axis to expand along; a mask is per-head
    where its heads differ, whatever its shape."""
    rng = np.random.default_rng(0)
    q, v = rng.standard_normal((2, 2, 3, 4)), rng.standard_normal((2, 2, 5, 4))
    shared = np.broadcast_to(rng.standard_normal((1, 1, 5, 4)), v.shape).copy()

    def sent(k, layout, **kw):
        return space_values.sdpa_values(Request("sdpa", (q, k, v), kw, layout=layout))

    assert ("layout", "expanded") in sent(shared, "expanded")
    assert ("layout", "contiguous") in sent(v, "expanded")  # nothing to expand: contiguous
    assert ("layout", "offset") in sent(v, "offset")
    assert ("layout", "transposed") in sent(v, "transposed")
    heads_alike = np.broadcast_to(rng.random((2, 1, 3, 5)) < 0.5, (2, 2, 3, 5))
    assert ("attn_mask", "per-head") not in sent(v, "contiguous", attn_mask=heads_alike)
    heads_differ = rng.random((2, 2, 3, 5)) < 0.5
    assert ("attn_mask", "per-head") in sent(v, "contiguous", attn_mask=heads_differ)


def test_every_value_the_classifiers_name_is_in_the_space():
    """A value read off a call that the space does not list would be counted nowhere."""
    values = {c: {(a.name, v.name) for a in axes for v in a.values} for c, axes in SPACES.items()}
    r = sdpa((2, 16, 1025, 129), (2, 16, 1, 129), (2, 16, 1, 129), dtype="bfloat16",
             attn_mask=np.ones((2, 16, 1025, 1), dtype=bool), dropout_p=1.0)
    assert space_values.sdpa_values(r) <= values["sdpa"]
    lesson = Request("attention", (np.ones((3, 1)), np.ones((70, 1)), np.ones((70, 2)),
                                   np.zeros((3, 70), dtype=bool)), dtype="float16")
    assert space_values.lesson_values(lesson) <= values["lesson"]


def test_a_gap_and_a_stale_reason_are_reported():
    """The rule can fail both ways: a value nothing reaches that says nothing, and a value
    that says nothing reaches it while something does."""
    found = {"sdpa": {"deep": {"heads:>=16": {"forward": ["x"], "backward": ["y"]}}},
             "lesson": {"deep": {}}}
    lines = coverage.problems(found)
    assert any(line.startswith("sdpa L:1: no forward relation") for line in lines)
    assert any(line.startswith("lesson T:1: no forward relation") for line in lines)
    assert not any("lesson T:1: no gradient" in line for line in lines)  # no autograd there
    assert not any("heads:>=16" in line for line in lines)
    assert not any("L:>1024" in line for line in lines)  # it says why


def test_a_varlen_value_nothing_reaches_is_a_gap():
    """The varlen space is measured like the others: a value no call reaches is a gap, both
    ways, unless it says why (the LSE carries no gradient)."""
    lines = coverage.problems({"varlen": {"deep": {}}})
    assert "varlen window:0: no forward relation reaches it at deep, and reference/space.py " \
        "says no reason" in lines
    assert any(line.startswith("varlen window:0: no gradient relation") for line in lines)
    assert any(line.startswith("varlen return_lse:on: no forward") for line in lines)
    assert not any(line.startswith("varlen return_lse:on: no gradient") for line in lines)
    assert "varlen" in coverage.CONTRACTS


def test_the_table_says_why_no_gradient_relation_reaches_a_value():
    """A value reached forward only prints the reason reference/space.py gives beside it; one
    a gradient relation reaches does not, and a contract without autograd says so once."""
    found = {"sdpa": {"deep": {"dtype:float32": {"forward": ["a"], "backward": []},
                               "requests:kept": {"forward": ["a"], "backward": ["b"]}}},
             "lesson": {"deep": {}}}
    text = coverage.render(found)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("float32"))
    assert lines[at + 1].strip().startswith("no gradient relation: gradients are judged at")
    kept = next(i for i, line in enumerate(lines) if line.strip().startswith("kept"))
    assert "no gradient relation" not in lines[kept + 1]
    assert text.count("no gradient relation reaches any value: a call without autograd") == 1


@pytest.fixture(scope="module")
def deep():
    return coverage.coverage(("deep",))


def test_every_value_at_deep_is_reached_or_says_why(deep):
    assert coverage.problems(deep) == []


def test_the_command_prints_the_table_and_writes_json(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "coverage.json"
    p = subprocess.run([sys.executable, "-m", "attnzoo", "coverage", "--depth", "quick",
                        "--contract", "lesson", "--output", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "lesson contract: detectors reaching each value" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["coverage"]["lesson"]["quick"]["function:softmax"]["forward"]
    bad = subprocess.run([sys.executable, "-m", "attnzoo", "coverage", "--seed", "-1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--seed must be 0 or more" in bad.stderr
