"""The battery's tiers: quick unchanged, standard and deep cover what real kernels break on.

The sweep's coverage is asserted on the materialised calls (shapes, masks, magnitudes), and
every entry whose page names a deeper tier is caught there by the detectors it lists.
"""

import numpy as np
import pytest

import zoo
from attnzoo.matrix import model as matrix
from attnzoo.runner import run
from attnzoo.space_values import sizes
from detectors import by_name
from detectors.kit import sweep
from detectors.kit.battery import Battery
from detectors.kit.memory import LAYOUTS, constant_axes
from detectors.kit.specs import ATTENTION

QUICK, STANDARD, DEEP = (Battery(0, depth=d) for d in ("quick", "standard", "deep"))
DEEPER = [e for e in zoo.BUGS if e.meta.depth != "quick"]


def _sdpa(battery):
    return battery.calls("sdpa")


def test_quick_is_todays_battery_and_deeper_tiers_keep_it_unchanged():
    assert sorted(c.name for c in QUICK.attention) == sorted(s.name for s in ATTENTION)
    for deeper in (STANDARD, DEEP):
        kept = [c for c in deeper.attention if any(c.spec is s for s in ATTENTION)]
        assert len(kept) == len(QUICK.attention)
        for call, same in zip(QUICK.attention, kept):
            assert call.spec is same.spec
            for a, b in ((call.q, same.q), (call.k, same.k), (call.v, same.v),
                         (call.mask, same.mask), (call.bias, same.bias)):
                assert (a is None and b is None) or np.array_equal(a, b)
    assert all(len(s.q) >= 4 for s in ATTENTION if "sdpa" in s.contracts)


def test_unknown_depth_is_refused():
    with pytest.raises(ValueError, match="quick, standard, deep"):
        Battery(0, depth="deeper")


def test_deep_sweep_pairs_every_two_values_of_the_space():
    """Strength 2, checked here rather than trusted to the generator: every pair of values of
    any two factors meets in some case, unless a constraint forbids that pair."""
    rows = sweep.covering()
    factors = list(sweep.FACTORS)
    for i, a in enumerate(factors):
        for b in factors[i + 1:]:
            met = {(r[a], r[b]) for r in rows}
            for x in sweep.FACTORS[a]:
                for y in sweep.FACTORS[b]:
                    pair = {a: x, b: y}
                    forbidden = (pair.get("gqa", "off") != "off" and pair.get("lead") in
                                 ("2-D", "3-D")) or (pair.get("lead") == "2-D" and (
                                     pair.get("mask", "").endswith("padding")
                                     or pair.get("layout") == "expanded"))
                    assert forbidden or (x, y) in met, f"{a}={x} never meets {b}={y}"


def test_deep_sweep_reaches_every_value_of_every_axis():
    calls = [c for c in DEEP.attention if c.name.startswith("deep-")]
    lengths = {c.q.shape[-2] for c in calls} | {c.k.shape[-2] for c in calls}
    for value in sweep.LENGTHS:  # each value with a size of its own, as the space defines it
        assert value in set().union(*(sizes(n) for n in lengths)), value
    assert {"1", "prime", "2^k", "2^k+1", "2^k-1"} <= set().union(
        *(sizes(c.q.shape[-1]) for c in calls))
    assert any(c.q.shape[-1] > 128 for c in calls) and any(c.q.shape[-1] in (80, 96, 112)
                                                           for c in calls)
    groups = {c.q.shape[-3] // c.k.shape[-3] for c in calls if c.gqa}
    assert 2 in groups and any(g >= 4 for g in groups)
    assert any(c.gqa and c.k.shape[-3] == 1 for c in calls)  # one key/value head
    assert {2, 3, 4, 5} <= {c.q.ndim for c in calls}
    assert any(c.q.shape[-2] == 1 and c.k.shape[-2] >= 1023 for c in calls)  # a long cache
    assert any(c.q.shape[-2] > c.k.shape[-2] for c in calls)  # more queries than keys
    assert {c.spec.layout for c in calls} == set(LAYOUTS)
    for battery in (STANDARD, DEEP):  # E == Ev, which fused kernels require, at every tier
        assert any(c.q.shape[-1] == c.v.shape[-1] for c in battery.attention)
    assert all(int(np.prod(c.q.shape[:-1])) * c.k.shape[-2] <= sweep.MAX_SCORES for c in calls)


def test_every_layout_is_sent_by_standard_and_an_expansion_has_an_axis_to_expand():
    """An "expanded" case shares keys and values (and its mask) along a leading axis, so the
    layout really sends them with stride 0; the standard tier already sends every layout."""
    assert {c.spec.layout for c in _sdpa(STANDARD)} == set(LAYOUTS)
    for call in STANDARD.attention + DEEP.attention:
        if call.spec.layout == "expanded":
            arrays = [a for a in (call.k, call.v, call.mask, call.bias) if a is not None]
            leading = [a for a in arrays if max(a.shape[:-2], default=1) > 1]
            assert leading and all(constant_axes(a) for a in leading), call.name


def test_masks_of_every_rank_including_per_head_under_4d_queries():
    ranks = {c.mask.ndim for c in DEEP.attention if c.mask is not None}
    assert {1, 2, 3, 4, 5} <= ranks
    per_head = [c for c in _sdpa(STANDARD) if c.mask is not None and c.q.ndim == 4
                and c.mask.ndim == 3 and c.mask.shape[0] == c.q.shape[1]]
    assert per_head


def test_masked_prefixes_span_whole_tiles_and_long_rows_go_empty():
    padded = [c for c in _sdpa(STANDARD) if c.spec.mask == "left-padding"]
    prefixes = {int((~c.mask.reshape(c.mask.shape[0], -1)[b]).sum())
                for c in padded for b in range(c.mask.shape[0])}
    assert max(prefixes) >= 128 and any(64 <= p < 128 for p in prefixes)
    empty = [c for c in _sdpa(STANDARD) if "empty" in c.spec.tags and c.k.shape[-2] > 128]
    assert empty and all((~c.mask.any(-1)).any() for c in empty)


def test_float16_magnitudes_overflow_raw_but_not_scaled():
    for call in [c for c in STANDARD.attention + DEEP.attention if "magnitude" in c.spec.tags]:
        raw = np.abs(call.q @ np.swapaxes(np.repeat(call.k, call.q.shape[-3] // call.k.shape[-3],
                                                    axis=-3) if call.gqa else call.k, -1, -2))
        if call.spec.name == "half-magnitudes":
            assert raw.max() > 65504
        assert (raw * call.scale).max() < 64  # the scaled scores stay moderate


def test_a_diffuse_head_sits_far_below_a_sharp_one_in_the_same_call():
    """What a softmax stabilised once per array, not per row, cannot survive in float16."""
    for call in [c for c in STANDARD.attention if "sharpness" in c.spec.tags]:
        scores = call.q @ np.swapaxes(call.k, -1, -2) / np.sqrt(call.q.shape[-1])  # (N, H, L, S)
        row_max = scores.max(-1)  # (N, H, L)
        assert scores.max() - row_max[:, 1].max() > 10 and np.abs(scores[:, 1]).max() < 2
        assert call.spec.contracts == ("lesson", "sdpa")


def test_unbatched_calls_reach_the_sdpa_contract():
    ranks = {c.q.ndim for c in _sdpa(STANDARD)}
    assert {2, 3} <= ranks


def test_shapes_do_not_depend_on_the_seed_and_values_do():
    other = Battery(1, depth="deep")
    assert [(c.name, c.q.shape, c.k.shape) for c in DEEP.attention] == \
           [(c.name, c.q.shape, c.k.shape) for c in other.attention]
    assert not np.array_equal(DEEP.attention[-1].q, other.attention[-1].q)


def test_matrix_expects_a_deeper_bug_to_survive_a_shallower_battery():
    assert DEEPER, "the zoo has entries that show only beyond quick"
    tiers = ("quick", "standard", "deep")
    rows = {d: {r.label: r for r in matrix.rows(d)} for d in tiers}
    for entry in DEEPER:
        shows = tiers.index(entry.meta.depth)
        for backend in entry.backends:
            label = f"{entry.id}-{backend}"
            for i, d in enumerate(tiers):
                want = tuple(entry.meta.caught_by) if i >= shows else ()
                assert rows[d][label].expected == want, (label, d)


def test_bug_depth_must_be_a_tier():
    good = dict(id="x-y", title="t", category="masking", symptom="silent", lesson="Do it.",
                source="", seen_in="somewhere", caught_by=("causality",))
    with pytest.raises(zoo.ZooError, match="depth"):
        zoo._validate_bug(zoo.Bug(**good, depth="shallow"), "zoo/x_y.py")


@pytest.mark.parametrize("entry", DEEPER, ids=[e.id for e in DEEPER])
def test_deeper_entry_is_caught_at_its_depth(entry):
    battery = {"standard": STANDARD, "deep": DEEP}[entry.meta.depth]
    rows = {r.label: r for r in matrix.rows(entry.meta.depth)}
    for backend in entry.backends:
        row = rows[f"{entry.id}-{backend}"]
        for name in entry.meta.caught_by:
            finding = run(by_name()[name], matrix.subject_for(row), battery)
            assert finding.caught, f"{row.label} survived {name} at {entry.meta.depth}"
