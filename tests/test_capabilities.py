"""Declared capabilities and run-time refusals: a case outside what a target supports is
``unsupported``, set aside for that case only; the detector runs every case that remains."""

import textwrap

import pytest

from attnzoo.checking import BadInput, run_check
from attnzoo.options import Options
from detectors.kit.capabilities import parse

HEADER = """
import torch.nn.functional as F

def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
"""
CALL = ("    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, "
        "is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)\n")


def target(tmp_path, name, body, declaration=""):
    path = tmp_path / f"{name}.py"
    path.write_text(declaration + textwrap.dedent(HEADER) + body + CALL, encoding="utf-8")
    return f"{path}:sdpa"


def check(locator, *detectors, **kw):
    sections, _, document, code = run_check(locator, Options.build(only=detectors, depth="quick",
                                                                   **kw))
    return {f.detector: f for f in sections[0]["findings"]}, document, code


def test_declared_unsupported_case_is_set_aside_and_the_rest_runs(tmp_path):
    # the target asserts it is never sent what it declares it lacks
    locator = target(tmp_path, "no_gqa", "    assert not enable_gqa, 'a declared case was sent'\n",
                     'ATTNZOO_UNSUPPORTED = ("gqa",)\n')
    found, doc, code = check(locator, "gqa_head_mapping", "matches_loop_oracle")
    assert found["gqa_head_mapping"].verdict == "unsupported"
    oracle = found["matches_loop_oracle"]
    assert oracle.verdict == "survived" and oracle.calls > 0
    assert oracle.unsupported and all("gqa" in why for why in oracle.unsupported.values())
    assert doc["implementations"][0]["target"]["unsupported"] == ["gqa"]
    assert code == 0


def test_unsupported_from_the_command_line(tmp_path):
    locator = target(tmp_path, "plain", "")
    found, doc, _ = check(locator, "causal_alignment", unsupported="is_causal")
    assert found["causal_alignment"].verdict == "unsupported"
    assert doc["implementations"][0]["target"]["unsupported"] == ["is_causal"]


def test_refusal_at_run_time_sets_aside_that_case_only(tmp_path):
    body = "    if is_causal:\n        raise RuntimeError('No available kernel. Aborting.')\n"
    locator = target(tmp_path, "refuses_causal", body)
    found, _, code = check(locator, "causal_alignment", "matches_loop_oracle")
    assert found["causal_alignment"].verdict == "unsupported"  # every case it has is causal
    oracle = found["matches_loop_oracle"]
    assert oracle.verdict == "survived", oracle.message  # not crashed, not ended early
    plain = check(target(tmp_path, "plain", ""), "matches_loop_oracle")[0]["matches_loop_oracle"]
    # one call a case: every case but the refused ones was answered once, none twice
    assert oracle.unsupported and oracle.calls == plain.calls - len(oracle.unsupported)
    assert all("No available kernel" in why for why in oracle.unsupported.values())
    assert code == 0


def test_a_named_refusal_counts_and_others_still_crash(tmp_path):
    body = "    if is_causal:\n        raise NotImplementedError('causal')\n"
    locator = target(tmp_path, "named", body, 'ATTNZOO_REFUSES = ("NotImplementedError",)\n')
    found, _, _ = check(locator, "causal_alignment")
    assert found["causal_alignment"].verdict == "unsupported"
    unnamed = target(tmp_path, "unnamed", body)
    found, _, code = check(unnamed, "causal_alignment")
    assert found["causal_alignment"].verdict == "crashed" and code == 1


def test_an_e_eq_ev_kernel_is_tested_through_zero_padded_twins(tmp_path):
    body = ("    if query.shape[-1] != value.shape[-1]:\n"
            "        raise RuntimeError('No available kernel. Aborting.')\n")
    locator = target(tmp_path, "square_heads", body)
    found, _, code = check(locator, "matches_loop_oracle", "output_is_weighted_values")
    for f in found.values():
        assert f.verdict == "survived" and not f.unsupported, f.message
    assert code == 0


def test_a_kernel_without_scale_gets_twins_with_the_query_rescaled(tmp_path):
    # E == Ev only and no scale keyword (nn.MultiheadAttention's case): an Ev > E call goes
    # as Q·sqrt(Ev/E) padded to Ev, so its scores keep 1/sqrt(E); gradients come back cropped
    body = ("    assert scale is None, 'a declared case was sent'\n"
            "    if query.shape[-1] != value.shape[-1]:\n"
            "        raise RuntimeError('No available kernel. Aborting.')\n")
    locator = target(tmp_path, "square_no_scale", body,
                     'ATTNZOO_UNSUPPORTED = ("e_ne_ev", "scale")\n')
    found, _, code = check(locator, "matches_loop_oracle", "correct_gradients")
    for f in found.values():
        assert f.verdict == "survived" and f.calls > 0, f.message
        assert not any("e_ne_ev" in why for why in (f.unsupported or {}).values()), f.unsupported
    assert code == 0


def test_a_padded_twin_does_not_hide_a_wrong_answer(tmp_path):
    body = ("    if query.shape[-1] != value.shape[-1]:\n"
            "        raise RuntimeError('No available kernel. Aborting.')\n"
            "    scale = 1.0  # no 1/sqrt(E): wrong on every case\n")
    locator = target(tmp_path, "square_unscaled", body)
    found, _, code = check(locator, "matches_loop_oracle")
    assert found["matches_loop_oracle"].verdict == "killed" and code == 1


def test_unknown_capability_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="unknown capability 'gqq'"):
        parse("gqa,gqq")
    with pytest.raises(BadInput, match="--unsupported"):
        run_check(target(tmp_path, "plain2", ""), Options.build(unsupported="flash", depth="quick"))
