"""Precision apart from semantics, ``--dtype`` scoping every call, and declared layouts.

The target's precision is measured once per dtype (detectors.kit.precision) and reported once
(computes_at_input_precision); semantic relations are judged at it, capped so that a wrong
answer still fails. ``check --dtype D`` sends the target nothing but D. A target declaring
``layout=BLHE`` is called in its own layout by the harness.
"""

import re

import numpy as np
import pytest
import torch

from attnzoo.checking import run_check
from attnzoo.options import Options
from attnzoo.runner import run
from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.target import Target
from detectors import all_detectors, by_name
from detectors.kit import expect, precision
from detectors.kit.battery import Battery
from detectors.kit.subject import Subject
from detectors.kit.tolerance import _round
from reference.sdpa import scaled_dot_product_attention
from zoo.computes_in_half import Torch as ComputesInHalf

TARGETS = "tests/targets"
FLOAT32_SOFTMAX = f"{TARGETS}/softmax_float32.py:sdpa"
DETECTORS = by_name()


def precision_of(subject, dtype):
    return subject.judge.precision(dtype)


def in_process(obj, locator, contract="sdpa", backend="torch", dtype="float64", scoped=False):
    target = Target(locator, locator, contract, backend)
    return Subject(target, InProcess(target, obj=obj), dtype, scoped=scoped)


def flagged(locator, **kw):
    sections, _, _, _ = run_check(locator, Options.build(depth="quick", **kw))
    return {f.detector: f for f in sections[0]["findings"] if f.caught}


# -- precision -----------------------------------------------------------------------------------


def test_a_float32_softmax_is_one_precision_finding_not_a_column_of_kills():
    found = flagged(FLOAT32_SOFTMAX)
    assert list(found) == ["computes_at_input_precision"], {d: f.message for d, f in found.items()}
    message = found["computes_at_input_precision"].message
    assert "float64 inputs computed to float32 accuracy: error " in message
    assert ", float64 allows " in message and ", difference " in message
    assert found["computes_at_input_precision"].evidence.snippet  # a reproduction, as for any


def test_a_float32_softmax_is_clean_at_float32():
    assert flagged(FLOAT32_SOFTMAX, dtype="float32") == {}


def test_a_soft_cap_is_a_wrong_answer_not_a_coarser_precision():
    """Its error on plain cases is float16-sized, but on scores that are exact in every format
    it is far more than rounding: it is judged at float64, not absorbed as float16."""
    from detectors.kit import precision

    subject = in_process(None, f"{TARGETS}/soft_capped.py:sdpa")
    subject.executor = InProcess(subject.target)
    found = precision_of(subject, "float64")
    assert found.effective is None and "rounding probe" in found.unlike, found
    caught = flagged(f"{TARGETS}/soft_capped.py:sdpa")
    assert "computes_at_input_precision" not in caught
    allowed = re.search(r"\(± ([0-9.e+-]+)\)", caught["matches_loop_oracle"].message)
    assert float(allowed.group(1)) < 1e-8  # float64's allowance, not float16's (about 0.02)
    for call in precision.rounding_probes():  # what makes them probes of rounding
        scores = call.q @ np.swapaxes(call.k, -1, -2) / 2  # (1, H, 4, 8)
        for a in (call.q, call.k, call.v, scores):
            assert np.array_equal(_round(a, "bfloat16"), a)


def test_computes_in_half_is_measured_at_float16_and_still_caught():
    subject = in_process(ComputesInHalf(), "zoo/computes_in_half.py:TORCH", "lesson")
    found = precision_of(subject, "float64")
    assert (found.dtype, found.effective) == ("float64", "float16")
    assert found.error > found.allows
    # semantic relations are judged at float16's allowance, precision ones at float64's
    call = precision.plain_cases(subject, Battery(0))[0]
    out = call.expected()[0]
    assert subject.allowance(call, out) == subject.strict_allowance(call, out, "float16")
    assert subject.strict_allowance(call, out) < subject.allowance(call, out)
    finding = run(DETECTORS["computes_at_input_precision"], subject, Battery(0))
    assert finding.verdict == "killed", finding.message
    assert "float64 inputs computed to float16 accuracy" in finding.message


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_decode_step_is_judged_at_the_precision_attention_was_measured_to_have(seed):
    """Row t of a lesson's self-attention (judged strictly) against the decode step, which is an
    attention call: each side within its own allowance of the exact row. Judged at float64
    alone, float16 rounding that differs between 70 keys with 8 masked and 62 keys flagged
    computes-in-half on seed 0's standard battery and no other, a verdict that followed the
    draw; its float16 error is computes_at_input_precision's to report, once."""
    subject = in_process(ComputesInHalf(), "zoo/computes_in_half.py:TORCH", "lesson")
    finding = run(DETECTORS["prefix_consistency"], subject, Battery(seed, depth="standard"))
    assert finding.verdict == "survived", finding.message


def test_the_precision_reported_is_the_one_measured_whatever_the_seed_and_depth():
    """A kernel that drops its last key tile errs, on the standard tier's plain cases, by about
    bfloat16's allowance on some draws and past it on others. What is reported is the
    measurement every relation is judged at, so the verdict cannot follow the draw."""
    from zoo.key_tail_tile_dropped import Sdpa

    found = set()
    for seed, depth in [(0, "standard"), (1, "standard"), (2, "quick")]:
        subject = in_process(Sdpa(), "zoo/key_tail_tile_dropped.py:SDPA")
        f = run(DETECTORS["computes_at_input_precision"], subject, Battery(seed, depth=depth))
        found.add((f.verdict, f.message))
    assert len(found) == 1, found
    measured = precision_of(in_process(Sdpa(), "zoo/key_tail_tile_dropped.py:SDPA"),
                                 "float64")
    assert (next(iter(found))[0] == "killed") == measured.coarser


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_the_reference_computes_at_its_inputs_precision(dtype):
    subject = in_process(scaled_dot_product_attention, "reference/sdpa.py:sdpa", dtype=dtype)
    found = precision_of(subject, dtype)
    assert found.measured and found.effective == dtype and not found.coarser
    assert found.error <= found.allows


def wrong_scale(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                enable_gqa=False):
    """Scores not scaled at all: a wrong answer no floating-point format explains."""
    return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                        1.0 if scale is None else scale, enable_gqa)


def test_gross_error_is_not_taken_for_imprecision():
    subject = in_process(wrong_scale, "tests/test_precision.py:wrong_scale")
    found = precision_of(subject, "float64")
    assert found.effective is None  # beyond the cap: nothing is widened
    call = precision.plain_cases(subject, Battery(0))[0]
    out = call.expected()[0]
    assert subject.allowance(call, out) == subject.strict_allowance(call, out)
    battery = Battery(0)
    assert run(DETECTORS["matches_loop_oracle"], subject, battery).verdict == "killed"
    finding = run(DETECTORS["computes_at_input_precision"], subject, battery)
    assert finding.verdict == "n/a" and "more than any floating-point format" in finding.message


def test_the_measurement_does_not_touch_the_detectors_instance():
    calls = []

    class Counting:
        def __init__(self):
            self.n = 0

        def __call__(self, *args, **kw):
            self.n += 1
            calls.append(self)
            return scaled_dot_product_attention(*args, **kw)

    subject = in_process(Counting(), "tests/test_precision.py:Counting")
    precision_of(subject, "float64")
    assert calls and subject.executor.obj.n == 0 and subject.calls == 0


def test_messages_show_the_difference_with_digits_enough_to_see_it():
    with pytest.raises(expect.Mismatch) as known:
        expect.close(np.array([0.4011121234]), np.array([0.4011120033]), 1e-10)
    assert known.value.text == \
        "expected out[0] = 0.401112 (± 1e-10), got 0.4011121 (off by 1.2e-07)"
    with pytest.raises(expect.Mismatch) as relation:
        expect.agree(np.array([0.4011121234]), np.array([0.4011120033]), 1e-10)
    assert relation.value.text == ("f(x)[0] = 0.4011121, f(x′)[0] = 0.401112, should be equal "
                                   "(± 1e-10; they differ by 1.2e-07)")


# -- --dtype scopes every call -------------------------------------------------------------------


class Recorder:
    """torch's reference SDPA, recording the dtype of every query it is given."""

    def __init__(self):
        self.dtypes = set()

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        self.dtypes.add(str(query.dtype).removeprefix("torch."))
        return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                            scale, enable_gqa)


def test_a_scoped_run_sends_the_target_only_its_dtype():
    recorder = Recorder()
    subject = in_process(recorder, "tests/test_precision.py:Recorder", dtype="float32",
                         scoped=True)
    subject.executor.fresh = lambda: subject.executor  # one instance: every call is recorded
    battery = Battery(0)
    findings = {d.NAME: run(d, subject, battery) for d in all_detectors()}
    assert recorder.dtypes == {"float32"}
    assert not [f.message for f in findings.values() if f.caught or f.verdict == "error"]
    gradients = findings["correct_gradients"]
    assert gradients.verdict == "survived" and gradients.calls > 0
    assert gradients.unsupported and all("--dtype float32 scopes every call" in why
                                         for why in gradients.unsupported.values())
    assert findings["dtype_follows_input"].verdict == "survived"
    assert findings["low_precision_agreement"].verdict == "survived"


def test_an_unscoped_run_still_tries_every_dtype():
    recorder = Recorder()
    subject = in_process(recorder, "tests/test_precision.py:Recorder")
    subject.executor.fresh = lambda: subject.executor
    run(DETECTORS["dtype_follows_input"], subject, Battery(0))
    assert recorder.dtypes == {"float64", "float32", "float16", "bfloat16"}


def test_a_scoped_float64_run_has_no_low_precision_part():
    subject = in_process(Recorder(), "tests/test_precision.py:Recorder", scoped=True)
    finding = run(DETECTORS["low_precision_agreement"], subject, Battery(0))
    assert finding.verdict == "n/a" and "--dtype float64 scopes every call" in finding.message


def test_check_dtype_reaches_a_target_that_refuses_float64():
    found = flagged(f"{TARGETS}/float32_only.py:sdpa", dtype="float32")
    assert found == {}, {d: f.message for d, f in found.items()}


# -- layouts -------------------------------------------------------------------------------------


def test_a_blhe_target_is_conformant_once_its_layout_is_declared():
    assert flagged(f"{TARGETS}/blhe_only.py:declared") == {}
    sections, _, document, _ = run_check(f"{TARGETS}/blhe_only.py:sdpa",
                                         Options.build(depth="quick", unsupported="layout=BLHE"))
    assert [f.detector for f in sections[0]["findings"] if f.caught] == []
    target = document["implementations"][0]["target"]
    assert target["layout"] == "BLHE" and target["unsupported"] == []


def test_a_blhe_target_undeclared_is_flagged():
    assert "matches_loop_oracle" in flagged(f"{TARGETS}/blhe_only.py:sdpa",
                                            only=["matches_loop_oracle"])


def test_the_harness_sends_blhe_and_reads_the_answer_back():
    seen = []

    def blhe(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
        seen.append((tuple(query.shape), None if attn_mask is None else tuple(attn_mask.shape)))
        def t(a):
            return a.transpose(-3, -2)

        return t(torch.nn.functional.scaled_dot_product_attention(
            t(query), t(key), t(value), attn_mask=attn_mask, is_causal=is_causal, scale=scale))

    blhe.ATTNZOO_UNSUPPORTED = ("layout=BLHE",)
    subject = in_process(blhe, "tests/test_precision.py:blhe")
    call = next(c for c in Battery(0).attention if c.name == "heads-shared-mask")
    answer = subject.attend(call)
    N, H, L, E = call.q.shape
    assert seen == [((N, L, H, E), call.mask.shape)]  # the mask as the scores are laid out
    np.testing.assert_allclose(answer.out, call.expected()[0], atol=1e-12)
