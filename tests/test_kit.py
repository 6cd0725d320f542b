"""The kit on its own: rounding, the accumulation bound, snippets, the battery, needs, assertions.

Every detector leans on these, so each is checked directly against an independent account of
what it claims: torch's own casts, float32 arithmetic done by hand, the snippet run for real.
"""

import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import torch

from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.target import Manifest, Target
from detectors import all_detectors, baseline_suites
from detectors.kit import expect
from detectors.kit.allowed import allowed
from detectors.kit.battery import Battery
from detectors.kit.expect import Mismatch
from detectors.kit.needs import ATTENTION as ATTENTION_NEEDS
from detectors.kit.needs import SELF_ATTENTION, SOFTMAX, Needs, applicable, parts
from detectors.kit.specs import ATTENTION, SELF
from detectors.kit.subject import Subject
from detectors.kit.tolerance import EPS, _round, accumulation_bound

# -- tolerance: rounding to a precision ----------------------------------------------------------


def awkward_values(rng):
    """Random magnitudes over many binades, exact ties, signed zeros, inf, NaN and overflow."""
    spread = rng.standard_normal(4000) * 10.0 ** rng.integers(-30, 30, 4000)
    ties = (rng.integers(1, 2**15, 200).astype(np.uint32) << 16 | 0x8000).view(np.float32)
    ties = ties.astype(np.float64)  # exactly half-way between two bfloat16 numbers
    odd = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e300, 2.0**-140])
    return np.concatenate([spread, ties, -ties, odd])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_round_agrees_with_torchs_own_cast(dtype):
    """_round(a, dtype) is torch's cast to dtype and back, to the bit (ties to even included)."""
    a = awkward_values(np.random.default_rng(0))
    with np.errstate(over="ignore"):
        got = _round(a, dtype)
    want = torch.from_numpy(a).to(getattr(torch, dtype)).double().numpy()
    assert np.array_equal(got, want, equal_nan=True)
    numbers = ~np.isnan(want)  # a NaN's sign bit is no part of its value
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))  # -0.0 stays


def test_bfloat16_rounds_ties_to_even():
    """1 + 2^-8 lies half-way between 1 and 1 + 2^-7: it goes to 1 (even); 1 + 3·2^-8 goes up."""
    a = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-8 + 2.0**-20])
    assert _round(a, "bfloat16").tolist() == [1.0, 1 + 2 * 2.0**-7, 1 + 2.0**-7]


# -- tolerance: the bound on float32 accumulation ------------------------------------------------


def float32_sum(terms, axis):
    """Σ along ``axis`` with a float32 accumulator, one rounding per term, as a kernel does."""
    terms = np.moveaxis(np.asarray(terms, dtype=np.float32), axis, 0)
    acc = np.zeros(terms.shape[1:], dtype=np.float32)
    for t in terms:
        acc = (acc + t).astype(np.float32)
    return acc.astype(np.float64)


def accumulated(call):
    """(out, weights) with the dot products and the output summed in float32 (all else exact)."""
    keep = allowed(call)  # (..., L, S)
    q, k = call.q[..., :, None, :], call.k[..., None, :, :]  # (..., L, 1, E), (..., 1, S, E)
    scale = 1 / np.sqrt(call.q.shape[-1]) if call.scale is None else call.scale
    scores = float32_sum(np.float32(q) * np.float32(k), -1) * scale  # (..., L, S)
    scores = np.where(keep, scores, -np.inf)
    m = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(m), 0.0, m))
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total == 0, 1.0, total)
    products = np.float32(weights)[..., :, :, None] * np.float32(call.v)[..., None, :, :]
    return float32_sum(products, -2), weights  # (..., L, Ev), (..., L, S)


def random_calls(seeds):
    """The battery's calls without a float mask or grouped heads (what ``accumulated``
    models), with normal draws instead of the 1/8 grid, on which float32 sums are exact."""
    calls = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        draw = lambda a, rng=rng: (  # noqa: E731
            rng.standard_normal(a.shape).astype(np.float32).astype(np.float64))
        calls += [c.with_(q=draw(c.q) * c.spec.logits, k=draw(c.k), v=draw(c.v))
                  for c in Battery(seed).attention if c.bias is None and not c.gqa]
    return calls


def test_accumulation_bound_bounds_the_float32_error_and_is_not_absurdly_loose():
    worst = {"out": 0.0, "weights": 0.0}
    for call in random_calls(range(6)):
        out, weights = accumulated(call)
        exact_out, exact_weights = call.expected()
        for what, got, exact in (("out", out, exact_out), ("weights", weights, exact_weights)):
            err = float(np.max(np.abs(got - exact), initial=0.0))
            bound = accumulation_bound(call, what)
            assert err <= bound, (call.name, what, err, bound)
            if err:
                worst[what] = max(worst[what], err / bound)
    # the tightest case comes within a factor of 50 of the bound: first-order, not a guess
    assert worst["out"] > 1 / 50 and worst["weights"] > 1 / 50, worst


def test_accumulation_bound_scales_with_the_inputs():
    """A score twice as large has twice the error bound; a softmax has no dot products."""
    call = Battery(0).attention[3]
    double = call.with_(q=call.q * 2)
    ratio = accumulation_bound(double, "weights") / accumulation_bound(call, "weights")
    assert ratio > 1.5
    assert accumulation_bound(Battery(0).softmax[0], "out") == 0.0
    assert accumulation_bound(call, "out") < 1e3 * EPS["float32"] * np.abs(call.v).max()


# -- snippets ------------------------------------------------------------------------------------

SNIPPET_TARGETS = {
    "numpy": Target("reference", "reference.lesson_numpy", "lesson", "numpy"),
    "torch": Target("reference", "reference.lesson_torch", "lesson", "torch"),
    "sdpa": Target("reference", "reference.sdpa:scaled_dot_product_attention", "sdpa", "torch"),
}


def as_numpy(x):
    return x.detach().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@pytest.mark.parametrize("row", SNIPPET_TARGETS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_snippets_compile_and_reproduce_the_answer(row, dtype):
    target = SNIPPET_TARGETS[row]
    subject = Subject(target, InProcess(target), dtype)
    battery = Battery(0)
    calls = [c for c in battery.attention if subject.supports(c)]
    picked = [c for c in calls if c.mask is not None][:2] + [c for c in calls if c.causal][:1]
    picked += [c for c in calls if c.bias is not None][:1] + [c for c in calls if c.gqa][:1]
    answers = [subject.attend(c) for c in picked] + [subject.self_attend(battery.self_attention[1])]
    assert len(answers) >= 3
    for answer in answers:
        code = subject.evidence([answer], relation="r1 is the answer").snippet
        assert code.endswith("# r1 is the answer")
        scope = {}
        exec(compile(code, "<snippet>", "exec"), scope)  # noqa: S102 - our own reproduction
        got = scope["r1"][0] if target.contract == "lesson" else scope["r1"]
        got = as_numpy(got).reshape(answer.out.shape)  # SDPA self-attention drops its (N, 1)
        assert np.array_equal(got, answer.out, equal_nan=True), code


def test_a_snippet_names_each_array_once():
    target = SNIPPET_TARGETS["numpy"]
    subject = Subject(target, InProcess(target))
    call = Battery(0).attention[0]
    first, second = subject.attend(call), subject.attend(call)
    code = subject.evidence([first, second]).snippet
    made = re.findall(r"^([QKV]\d+) = ", code, flags=re.M)
    assert sorted(made) == ["K2", "Q1", "V3"], code  # each made once, reused by the second call
    assert "r2 = impl.attention(Q1, K2, V3)" in code
    assert subject.evidence([first, second]).call.count("attention(") == 1  # said once


def run_snippet(code, target, shape):
    """r1 of a snippet, run for real, as a float64 array of ``shape``."""
    scope = {}
    exec(compile(code, "<snippet>", "exec"), scope)  # noqa: S102 - our own reproduction
    got = scope["r1"][0] if target.contract == "lesson" else scope["r1"]
    return as_numpy(got).reshape(shape)


@pytest.mark.app  # the standard tier: the engineer's half, not the classroom run's
@pytest.mark.parametrize("row", ["numpy", "sdpa"])
def test_standard_depth_snippets_redraw_their_inputs_and_reproduce_the_answer(row):
    """Cases of up to 513 keys and head dims of 256: a few lines each, however large."""
    target = SNIPPET_TARGETS[row]
    subject = Subject(target, InProcess(target), "float32")
    quick = {c.name for c in Battery(0).attention}
    calls = [c for c in Battery(0, depth="standard").attention
             if c.name not in quick and subject.supports(c)]
    assert len(calls) >= (4 if row == "numpy" else 14)
    for call in calls:
        answer = subject.attend(call)
        code = subject.evidence([answer]).snippet
        assert code.count("\n") < 40 and "np.random.default_rng([0, 0, 10" in code, code
        assert np.array_equal(run_snippet(code, target, answer.out.shape), answer.out), call.name


@pytest.mark.app  # the standard tier
@pytest.mark.parametrize("row", ["torch", "sdpa"])
def test_self_attention_snippets_write_projections_as_products(row):
    """Self-attention at 70 tokens, its prefix and a decode step: SDPA is sent X @ W with a
    head axis, a decode step slices of them. Each is a line over X and W redrawn from their
    stream, not thousands of numbers (a reproduction of these took 264 and 435 lines)."""
    from detectors.prefix_consistency import decode_step

    target = SNIPPET_TARGETS[row]
    subject = Subject(target, InProcess(target))
    call = next(c for c in Battery(0, depth="standard").self_attention if c.name == "self-long")
    full = subject.self_attend(call)
    prefix = subject.self_attend(replace(call, x=call.x[..., :40, :].copy()))
    step = subject.attend(decode_step(call, 61, subject.heads_axis))
    for answers, r in (([full, step], "r2"), ([full, prefix], "r2"), ([step], "r1")):
        code = subject.evidence(answers).snippet
        assert code.count("\n") < 25 and "np.random.default_rng([0, 0, 1100])" in code, code
        if row == "sdpa" or any(a is step for a in answers):  # a lesson prefix sends X
            assert " @ W" in code, code
        scope = {}
        exec(compile(code, "<snippet>", "exec"), scope)  # noqa: S102 - our own reproduction
        got = scope[r][0] if target.contract == "lesson" else scope[r]
        want = answers[-1].out
        assert np.array_equal(as_numpy(got).reshape(want.shape), want), code


@pytest.mark.app  # on a case of the standard tier
def test_derived_inputs_are_written_as_their_derivation():
    """A perturbed copy, a permutation, V = I and a float mask from a bool one: each is a line
    or two over the battery's arrays, and the calls still reproduce."""
    target = SNIPPET_TARGETS["sdpa"]
    subject = Subject(target, InProcess(target))
    call = next(c for c in Battery(0, depth="standard").attention if c.name == "tiles-equal-dims")
    k = call.k.copy()
    k[..., 70, :] += 0.5  # one key bumped
    derived = {
        "copy()": call.with_(k=k),
        "np.take(": call.with_(q=np.take(call.q, np.arange(65)[::-1], axis=-2)),
        "np.eye(": call.with_(v=np.broadcast_to(np.eye(257), call.v.shape[:-1] + (257,)).copy()),
        "np.where(": call.with_(mask=None, bias=np.where(call.mask, 0.0, -np.inf)),
    }
    for recipe, changed in derived.items():
        answer = subject.attend(changed)
        code = subject.evidence([answer]).snippet
        assert recipe in code and code.count("\n") < 20, code
        assert np.array_equal(run_snippet(code, target, answer.out.shape), answer.out), recipe


def test_a_trial_recipe_over_inf_entries_warns_nothing():
    """Recipes are tried on whatever arrays a call carried: inf · 0 in a trial is no warning
    on the run's stderr (under an "error" filter, a warning would make the recipe fail)."""
    import warnings

    from detectors.kit.reproduce import Builder

    base, product = np.array([np.inf, 2.0]), np.array([np.nan, 0.0])  # base · 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Builder._run(product, "x", ["x = base * 0"], {"np": np, "base": base}, {})


def test_an_array_no_recipe_gives_is_printed_as_its_numbers():
    target = SNIPPET_TARGETS["numpy"]
    subject = Subject(target, InProcess(target))
    call = Battery(0).attention[5]
    odd = call.q + np.random.default_rng(5).standard_normal(call.q.shape) * 1e-3  # off the grid
    answer = subject.attend(call.with_(q=odd))
    code = subject.evidence([answer]).snippet
    assert "Q1 = np.array([" in code and repr(float(odd.flat[0])) in code
    assert np.array_equal(run_snippet(code, target, answer.out.shape), answer.out)


# -- the battery ---------------------------------------------------------------------------------

SQUARE_CAUSAL = {"batch-causal", "heads-causal", "causal-square", "gqa-causal"}  # its docstring


def test_battery_names_are_unique():
    battery = Battery(0, repeat=2)
    names = [c.name for c in battery.attention + battery.self_attention + battery.softmax]
    assert not [n for n, k in Counter(names).items() if k > 1]
    assert len({s.name for s in ATTENTION}) == len(ATTENTION)
    assert len({s.name for s in SELF}) == len(SELF)


def sizes(spec):
    """The sizes the docstring speaks of: B…, H (query heads), L, S, E, Ev (or B, T, d…)."""
    if hasattr(spec, "x"):
        return {**{f"B{i}": n for i, n in enumerate(spec.x[:-2])}, "T": spec.x[-2],
                "d_model": spec.x[-1], "d_k": spec.d_k, "d_v": spec.d_v}
    return {**{f"B{i}": n for i, n in enumerate(spec.q[:-2])}, "L": spec.q[-2],
            "S": spec.k[-2], "E": spec.q[-1], "Ev": spec.v[-1]}


@pytest.mark.parametrize("spec", ATTENTION + SELF, ids=lambda s: s.name)
def test_battery_sizes_differ_as_its_docstring_claims(spec):
    named = {k: n for k, n in sizes(spec).items() if n != 1}
    repeated = {k: n for k, n in named.items() if list(named.values()).count(n) > 1}
    if spec.name in SQUARE_CAUSAL:
        assert repeated == {"L": spec.q[-2], "S": spec.q[-2]} and spec.q[-2] == spec.k[-2]
    else:
        assert not repeated, f"{spec.name} repeats sizes {repeated}"


def test_the_square_causal_specs_are_causal():
    square = [s for s in ATTENTION if s.name in SQUARE_CAUSAL]
    assert len(square) == len(SQUARE_CAUSAL)
    assert all(s.causal or s.mask == "causal" for s in square)


# -- needs: applicability as data ----------------------------------------------------------------


def test_every_detector_declares_its_needs_as_data():
    for d in all_detectors() + baseline_suites():
        declared = parts(d.NEEDS)
        assert declared and all(isinstance(n, Needs) for _, n in declared), d.NAME


LESSON = Target("t", "t.py", "lesson", "numpy")
SDPA = Target("t", "t.py:f", "sdpa", "torch")


def test_needs_say_why_a_part_does_not_apply():
    partial = Manifest({"softmax": None, "attention": "t defines no attention"})
    narrow = Manifest({"sdpa": None}, ("attn_mask",))
    needs = {"softmax": SOFTMAX, "attention": ATTENTION_NEEDS, "self": SELF_ATTENTION}
    assert applicable(needs, LESSON, partial) == (("softmax",), "t defines no attention")
    assert applicable(needs, SDPA, narrow) == (("attention",),
                                               "an SDPA-style callable has no softmax")
    grads = ATTENTION_NEEDS.but(torch="autograd")
    assert applicable(grads, LESSON, partial)[1] == (
        "autograd needs torch; this is a NumPy implementation")
    assert applicable(SELF_ATTENTION, SDPA, narrow) == ((), "the callable takes no is_causal")


# -- assertions ----------------------------------------------------------------------------------


def test_close_names_the_first_offending_index_and_both_values():
    with pytest.raises(Mismatch) as raised:
        expect.close(np.array([[1.0, 2.0], [3.0, 5.0]]), np.array([[1.0, 2.0], [3.0, 4.0]]),
                     1e-3, "weights")
    m = raised.value
    assert (m.index, m.expected, m.actual) == ((1, 1), "weights[1, 1] = 4 (± 0.001)",
                                              "5 (off by 1)")
    assert m.verdict == "killed"


def test_agree_never_calls_an_output_expected():
    with pytest.raises(Mismatch) as raised:
        expect.agree(np.array([1.0, 2.0]), np.array([1.0, np.nan]), 1e-9)
    m = raised.value.because("a relation")
    assert m.text == "f(x)[1] = 2, f(x′)[1] = nan, should be equal (± 1e-09; a relation)"
    assert "expected" not in m.text and m.verdict == "nan"


def test_fail_is_unconditional_and_holds_is_not():
    expect.holds(True, "anything", "nothing")
    with pytest.raises(Mismatch, match=re.escape("expected a gradient, got none")):
        expect.fail("a gradient", "none")


def test_plural_agrees_with_its_number():
    assert [expect.plural(n, "token") for n in (1, 2)] == ["1 token", "2 tokens"]


def test_needs_describe_each_part_contract_by_contract():
    from detectors.kit.needs import describe

    needs = {"softmax": SOFTMAX, "self": SELF_ATTENTION.but(torch="autograd")}
    assert describe(needs) == ("softmax: lesson softmax; "
                               "self: lesson causal_self_attention | sdpa is_causal=, torch")
    assert describe(ATTENTION_NEEDS) == "lesson attention | sdpa"


def test_the_trusted_reference_remembers_pure_answers_and_hands_out_copies():
    """The kill matrix's reference (executor.Trusted) answers a pure request it has seen from
    memory, as a copy a caller may write into; a seeded request always runs."""
    from attnzoo.sandbox.executor import Trusted
    from detectors.kit.calls import Request

    target = SNIPPET_TARGETS["sdpa"]
    trusted = Trusted(target)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 3, 4)) for _ in range(3))
    first = trusted.run(Request("sdpa", (q, k, v)))
    first.values[0][...] = np.nan  # the caller writes into what it was given
    again = trusted.run(Request("sdpa", (q.copy(), k.copy(), v.copy())))
    assert len(trusted.answers) == 1
    assert np.isfinite(again.values[0]).all()
    assert np.array_equal(again.values[0], InProcess(target).run(Request("sdpa", (q, k, v)))
                          .values[0])
    trusted.run(Request("sdpa", (q, k, v), seed=3))
    assert len(trusted.answers) == 1  # a seeded call is not a pure one: it ran, unremembered
