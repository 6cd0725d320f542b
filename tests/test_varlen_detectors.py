"""The varlen contract's kill matrix: every varlen zoo bug is caught by exactly the detectors its
``caught_by`` names, the reference and every decoy pass every detector (float64 and float32,
and float16/bfloat16 against the same-precision reference), each detector fails on a target
that breaks its property and nothing else, and the varlen reference reduces to SDPA's.

Outside the classroom run (tests/conftest.py marks it ``app``): run it by path.
"""

import importlib
import math

import pytest
import torch

import detectors
import zoo.varlen as varlen_zoo
from detectors.kit import varlen
from reference.sdpa import scaled_dot_product_attention as sdpa
from reference.varlen import attn_varlen

DETECTORS = {d.NAME: d for d in detectors.varlen_detectors()}
BUGS = varlen_zoo.BUGS
CLEAN = [("reference", attn_varlen)] + [(e.id, varlen_zoo.implementation(e))
                                         for e in varlen_zoo.DECOYS]
PROBES = {"causal_diagonal_convention", "empty_row_convention", "window_counting_convention"}


def conventions(name):
    """What a decoy declares (its module's CONVENTIONS), {} for the contract's own."""
    entry = next((e for e in varlen_zoo.DECOYS if e.id == name), None)
    return getattr(importlib.import_module(entry.module), "CONVENTIONS", {}) if entry else {}


def caught(fn, alignment="bottom-right", dtypes=("float64", "float32"), **declared):
    target = varlen.Target(fn, "target", alignment, **declared)
    return {name for name, d in DETECTORS.items() if varlen.check(d, target, dtypes)}


def test_the_zoo_and_the_suite_are_big_enough():
    assert len(BUGS) >= 24 and len(varlen_zoo.DECOYS) >= 4 and len(DETECTORS) >= 15
    styles = {type(varlen_zoo.implementation(e)).__mro__[1].__name__ for e in BUGS}
    assert styles == {"SequenceLoop", "PagedTiles", "SplitKV", "RecomputingBackward"}
    backward = [e for e in BUGS if e.meta.caught_by == ("gradients_match_reference",)]
    assert len(backward) >= 2


def test_the_sdpa_suite_and_zoo_do_not_see_the_varlen_ones():
    import zoo

    assert not set(DETECTORS) & {d.NAME for d in detectors.all_detectors()}
    assert not {e.id for e in BUGS} & {e.id for e in zoo.BUGS + zoo.DECOYS}


@pytest.mark.parametrize("entry", BUGS, ids=[e.id for e in BUGS])
def test_every_bug_is_caught_by_exactly_its_caught_by(entry):
    assert entry.meta.caught_by, f"{entry.id}: caught_by is empty"
    assert set(entry.meta.caught_by) <= set(DETECTORS), entry.meta.caught_by
    assert entry.meta.seen_in.count("https://github.com/") >= 1
    assert "# BUG" in entry.path.read_text()
    assert caught(varlen_zoo.implementation(entry)) == set(entry.meta.caught_by)


@pytest.mark.parametrize("name,fn", CLEAN, ids=[n for n, _ in CLEAN])
def test_the_reference_and_the_decoys_pass_every_detector(name, fn):
    assert caught(fn, dtypes=("float64", "float32", "float16", "bfloat16"),
                  **conventions(name)) == set()


CONVENTION_DECOYS = [e for e in varlen_zoo.DECOYS if conventions(e.id)]


@pytest.mark.parametrize("entry", CONVENTION_DECOYS, ids=[e.id for e in CONVENTION_DECOYS])
def test_a_decoy_of_another_convention_is_named_by_its_probe_when_undeclared(entry):
    """Declared, it is clean (above); undeclared, its probe names the convention it follows."""
    (field, value), = conventions(entry.id).items()
    probe = {"empty_rows": "empty_row_convention",
             "window_counting": "window_counting_convention"}[field]
    message = varlen.check(DETECTORS[probe], varlen.Target(varlen_zoo.implementation(entry)))
    assert f"follow {value};" in message or f"follows {value};" in message, message


def test_every_convention_has_a_decoy_and_bad_declarations_are_refused():
    declared = {(f, v) for e in CONVENTION_DECOYS for f, v in conventions(e.id).items()}
    assert {("empty_rows", "lse +inf"), ("empty_rows", "unmasked"), ("empty_rows", "uniform"),
            ("window_counting", "counts the current token")} <= declared
    for field in ("empty_rows", "window_counting"):
        with pytest.raises(ValueError):
            varlen.Target(attn_varlen, **{field: "sideways"})
    assert varlen.Target(attn_varlen, "t", "top-left").empty_rows == "zero"


def test_a_declared_convention_is_judged_by_it():
    """A top-left kernel declared top-left passes; declared bottom-right, the probe names the
    convention it follows."""
    top_left = varlen_zoo.implementation(next(e for e in BUGS if e.id == "varlen-causal-top-left"))
    assert caught(top_left, "top-left") == set()
    message = varlen.check(DETECTORS["causal_diagonal_convention"], varlen.Target(top_left))
    assert "follows top-left; the target declares bottom-right" in message
    assert caught(attn_varlen, "top-left") >= {"causal_diagonal_convention", "matches_reference"}
    with pytest.raises(ValueError):
        varlen.Target(attn_varlen, causal_alignment="middle")


# -- each detector fails on a target that breaks its property ----------------------------------


def with_lse(fn):
    """A breaker built on the reference: ``fn(out, lse, q, k, v, kw)`` -> (out, lse)."""
    def target(q, k, v, cu_seqlens_q, cu_seqlens_k=None, return_lse=False, **kw):
        out, lse = attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, return_lse=True, **kw)
        out, lse = fn(out, lse, q, k, v, dict(kw, cu_seqlens_q=cu_seqlens_q))
        return (out, lse) if return_lse else out
    return target


def calling(change):
    """A breaker that calls the reference with changed keywords."""
    def target(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
        q, k, v, kw = change(q, k, v, dict(kw))
        return attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
    return target


def widen(q, k, v, kw):
    wl, wr = kw["window_size"]
    kw["window_size"] = (wl + 1 if wl >= 0 else wl, wr)
    return q, k, v, kw


def no_cap(q, k, v, kw):
    kw["softcap"] = 0.0
    return q, k, v, kw


def steeper(q, k, v, kw):
    if kw.get("alibi_slopes") is not None:
        kw["alibi_slopes"] = kw["alibi_slopes"] * 2
    return q, k, v, kw


def heads_reversed(q, k, v, kw):
    return (q, k, v, kw) if q.shape[1] == k.shape[-2] else (q, k.flip(-2), v.flip(-2), kw)


BREAKERS = {
    "matches_reference": with_lse(lambda o, l, q, k, v, kw: (o * 1.01, l)),
    "per_sequence_equivalence": with_lse(
        lambda o, l, q, k, v, kw: (o + 0.01 * (len(kw["cu_seqlens_q"]) - 2), l)),
    "page_placement_invariance": with_lse(lambda o, l, q, k, v, kw: (
        o + (0.01 * float(kw["block_table"][0, 0]) if kw.get("block_table") is not None
             else 0.0), l)),
    "padding_is_never_read": with_lse(lambda o, l, q, k, v, kw: (o + 0 * v.sum(), l)),
    "window_is_a_key_slice": calling(widen),
    "softcap_limit_and_order": calling(no_cap),
    "alibi_is_a_float_bias": calling(steeper),
    "decode_matches_prefill": with_lse(
        lambda o, l, q, k, v, kw: (o + 0.01 * (kw["max_seqlen_q"] == 1), l)),
    "lse_matches_output": with_lse(lambda o, l, q, k, v, kw: (o, l / math.log(2))),
    "gqa_with_every_feature": calling(heads_reversed),
    "rows_without_keys_are_zero": with_lse(lambda o, l, q, k, v, kw: (
        torch.where(torch.isneginf(l).T[..., None], torch.nan, o), l)),
    # the forward unchanged, every gradient 1% too large
    "gradients_match_reference": with_lse(lambda o, l, q, k, v, kw: (
        o + 0.01 * (o - o.detach()), l)),
}


def test_every_detector_has_a_breaker():
    assert set(BREAKERS) | PROBES == set(DETECTORS)


@pytest.mark.parametrize("name", sorted(BREAKERS))
def test_each_detector_fails_on_a_breaking_of_its_property(name):
    message = varlen.check(DETECTORS[name], varlen.Target(BREAKERS[name], name))
    assert message and message.startswith("float64: "), message


def test_gradients_are_not_applicable_without_autograd():
    """A target whose output does not require grad offers no backward: n/a, not a pass."""
    def no_autograd(*args, **kw):
        with torch.no_grad():
            return attn_varlen(*args, **kw)
    detector = DETECTORS["gradients_match_reference"]
    outcome, why = varlen.verdict(detector, varlen.Target(no_autograd))
    assert outcome == "n/a" and "does not require grad" in why
    assert varlen.verdict(detector, varlen.Target(attn_varlen)) == ("pass", None)


def test_padding_and_unused_pages_get_zero_gradient():
    """The reference the gradients are judged by gives padding exactly zero gradient, and a
    backward that leaks gradient into an unused page is a finding."""
    case = varlen.battery(0)[8]  # paged in order, keys below allocated, spare pages
    leaves = [x.clone().requires_grad_(True) for x in (case.q, case.k, case.v)]
    out = attn_varlen(*leaves, **case.args)
    dk = torch.autograd.grad(out, leaves[1], torch.randn_like(out))[0]
    unused = varlen.poisoned(case).k.isnan()
    assert unused.any() and (dk[unused] == 0).all() and (dk[~unused] != 0).any()

    class Leak(torch.autograd.Function):
        @staticmethod
        def forward(ctx, k):
            return k.clone()

        @staticmethod
        def backward(ctx, g):
            return g + 1e-3  # every slot of every page, padding too

    def leaking(q, k, v, *args, **kw):
        return attn_varlen(q, Leak.apply(k), v, *args, **kw)
    message = varlen.check(DETECTORS["gradients_match_reference"], varlen.Target(leaking))
    assert message and "dk" in message


def test_the_padding_detector_sees_a_written_input():
    def scribbles(q, k, v, *args, **kw):
        out = attn_varlen(q, k, v, *args, **kw)
        q[-1] = 0.0  # a guard row of q (or the last query) overwritten
        return out
    message = varlen.check(DETECTORS["padding_is_never_read"], varlen.Target(scribbles))
    assert "changed its inputs" in message


# -- the reference is SDPA's on one sequence ----------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_the_reference_is_sdpa_on_one_sequence_without_window_or_cap(causal):
    case = varlen.build(11, "one sequence", (9,), (9,), Hq=4, Hk=2, D=8, Dv=6, causal=causal)
    out = attn_varlen(case.q, case.k, case.v, **case.args)  # (9, 4, 6)
    k = case.k[:9].repeat_interleave(2, dim=1)  # (9, 4, 8): the used keys, no garbage tail
    v = case.v[:9].repeat_interleave(2, dim=1)
    want = sdpa(case.q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                is_causal=causal)[0].transpose(0, 1)  # (9, 4, 6)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-12)


def test_the_battery_reaches_every_varlen_value_it_claims():
    """The cases draw the values the brief names: empty and one-token sequences, shuffled pages
    of one key and partial last pages, every window kind, caps, ALiBi forms, GQA, D != Dv."""
    reached = set().union(*(c.values for c in varlen.battery(0)))
    for pair in [("sequences", "empty"), ("sequences", "one token"), ("paging", "permuted"),
                 ("paging", "page of 1"), ("paging", "partial last page"),
                 ("paging", "shared"), ("seqused_k", "below allocated"), ("window", "0"),
                 ("window", "wider than sequence"), ("window", "left"), ("window", "right"),
                 ("window", "both"), ("softcap", "small"), ("softcap", "far above"),
                 ("alibi", "per head"), ("alibi", "per batch and head"), ("gqa", "mqa"),
                 ("gqa", "g=2"), ("head sizes", "Dv!=D"), ("head sizes", ">128"),
                 ("lengths", "sq<sk"), ("lengths", "sq>sk"), ("lengths", "sk=0"),
                 ("guard rows", "past the end")]:
        assert pair in reached, pair


def test_depths_draw_more_and_larger_cases():
    """quick ⊂ standard ⊂ deep; deep reaches sizes a tile-boundary bug needs; the default is
    standard, so callers without a depth see the cases they always did."""
    quick, standard, deep = (varlen.battery(0, d) for d in ("quick", "standard", "deep"))
    assert {c.name for c in quick} < {c.name for c in standard} < {c.name for c in deep}
    assert [c.name for c in varlen.Subject(None).cases()] == [c.name for c in standard]
    extra = deep[len(standard):]
    assert max(max(c.lens_k) for c in extra) >= 4 * 64 + 1
    assert {c.k.shape[1] for c in extra if c.paged} >= {16, 256}
    assert max(c.q.shape[-1] for c in extra) == 256 and max(c.B for c in extra) >= 16
    with pytest.raises(ValueError):
        varlen.Subject(None, depth="shallow")


def test_the_reference_and_a_tiled_decoy_pass_at_deep():
    tiles = varlen_zoo.implementation(next(e for e in varlen_zoo.DECOYS
                                           if e.id == "varlen-paged-tiles"))
    for fn in (attn_varlen, tiles):
        target = varlen.Target(fn)
        assert {n for n, d in DETECTORS.items()
                if varlen.check(d, target, ("float64",), depth="deep")} == set()


def test_poisoning_fills_exactly_the_padding():
    case = varlen.battery(0)[8]  # paged in order, keys below allocated
    poisoned = varlen.poisoned(case)
    assert poisoned.k.isnan().any() and not case.k.isnan().any()
    for b, n in enumerate(case.lens_k):
        kb, _ = varlen.sequence_keys(poisoned, b)
        assert len(kb) == n and not kb.isnan().any()
