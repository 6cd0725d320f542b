"""Declared conventions for a query row with no allowed key: ``--empty-rows {zero,uniform}``.

The contract says zeros (C5); JAX and keras apply a mask as a large negative fill, which gives
such a row the uniform average over every key, and document their masks so. A target declares
which (``--empty-rows``, ``ATTNZOO_EMPTY_ROWS``, ``--attnzoo-empty-rows``, a survey adapter's
declaration) and is judged by it. The uniform target of ``tests/targets/uniform_rows.py``
computes its rows by softmax of a fill, the oracle writes them out as the mean of V: they share
no code, so the oracle never shares a defect with what it judges.
"""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from test_cli import attnzoo as run_attnzoo

from attnzoo import options
from attnzoo.options import BadInput, Options
from attnzoo.sandbox.target import BadTarget, Target
from attnzoo.survey import run, write
from attnzoo.survey.adapters import jax_nn, keras_numpy, keras_torch
from attnzoo.survey.capabilities import Declaration
from attnzoo.vocabulary import VERDICTS
from detectors.kit import conventions
from detectors.kit.battery import Call
from detectors.kit.specs import Spec
from detectors.kit.verdict import CAUGHT
from reference.sdpa import scaled_dot_product_attention as reference

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("uniform_rows",
                                               REPO / "tests/targets/uniform_rows.py")
uniform_rows = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uniform_rows)
UNIFORM = "tests/targets/uniform_rows.py:uniform"
NAN_ROWS = "tests/targets/uniform_rows.py:nan_rows"
ZEROS = "torch.nn.functional:scaled_dot_product_attention"
ROWS = ("--only", "empty_rows_are_zero", "--only", "matches_loop_oracle", "--only",
        "correct_gradients")


def attnzoo(*args):
    """``attnzoo ARGS`` in this process, from the repository root: (code, stdout, stderr)."""
    done = run_attnzoo(*args)
    return done.returncode, done.stdout, done.stderr


def flagged(stdout):
    """The detectors the text report flags (killed, nan, crashed or hung)."""
    words = {VERDICTS[v].word for v in CAUGHT}
    return {line.split()[1] for line in stdout.splitlines()
            if line.startswith("  ") and line.split()[0] in words}


def call_with_empty_rows(gqa=False):
    """(N, H, L, S) = (2, 4, 3, 5), key/value heads 2 under GQA; row 1 of batch item 0 and
    row 2 of every item have no allowed key."""
    rng = np.random.default_rng(7)
    hkv = 2 if gqa else 4
    q, k, v = rng.normal(size=(2, 4, 3, 6)), rng.normal(size=(2, hkv, 5, 6)), \
        rng.normal(size=(2, hkv, 5, 4))
    mask = np.ones((2, 1, 3, 5), dtype=bool)
    mask[0, :, 1] = False
    mask[:, :, 2] = False
    spec = Spec("empty", q.shape, k.shape, v.shape, mask="given", gqa=gqa)
    return Call(spec, q, k, v, mask, name="empty")


# -- the options ------------------------------------------------------------------------------

def test_the_default_is_zero_and_a_bad_value_is_one_line_naming_the_option():
    assert Options.build().empty_rows == "zero" and Target("t", "t.py").empty_rows == "zero"
    assert Options.build(empty_rows="uniform").empty_rows == "uniform"
    with pytest.raises(BadInput, match=r"--empty-rows must be one of zero, uniform, not 'mean'"):
        Options.build(empty_rows="mean")
    code, out, err = attnzoo("check", UNIFORM, "--empty-rows", "mean")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--empty-rows" in err and "'mean'" in err
    assert options.EMPTY_ROWS == ("zero", "uniform") and "empty_rows" in options.HELP


# -- the oracle -------------------------------------------------------------------------------

@pytest.mark.parametrize("gqa", [False, True])
def test_the_oracle_gives_empty_rows_the_declared_convention(gqa):
    call = call_with_empty_rows(gqa)
    want = call.expected()
    assert conventions.expected(call, want, "top-left", "zero") is want
    out, weights = conventions.expected(call, want, "top-left", "uniform")
    v = np.repeat(call.v, 2, axis=-3) if gqa else call.v  # query head h reads kv head h // 2
    assert np.allclose(weights[0, :, 1], 1 / 5) and np.allclose(weights[:, :, 2], 1 / 5)
    assert np.allclose(out[0, :, 1], v[0].mean(axis=-2))
    assert np.allclose(out[:, :, 2], v.mean(axis=-2))
    assert np.array_equal(out[1, :, :2], want[0][1, :, :2])  # rows with a key: as they were
    assert np.array_equal(weights[1, :, 1], want[1][1, :, 1])


@pytest.mark.parametrize("gqa", [False, True])
def test_the_expected_gradients_are_the_uniform_rows(gqa):
    """The reference (zeros) plus the uniform rows' share equals autograd through the uniform
    target, whose rows are constant in query and keys."""
    call = call_with_empty_rows(gqa)
    g = np.random.default_rng(3).normal(size=call.expected()[0].shape)
    tensors = [torch.tensor(a, requires_grad=True) for a in (call.q, call.k, call.v)]
    mask = torch.tensor(call.mask)
    grads = {}
    for name, f in (("zero", reference), ("uniform", uniform_rows.uniform)):
        out = f(*tensors, attn_mask=mask, enable_gqa=gqa)
        grads[name] = dict(zip(("query", "key", "value"),
                               (a.numpy() for a in torch.autograd.grad(out, tensors,
                                                                        torch.tensor(g)))))
    judged = conventions.gradients(call, grads["zero"], g, "top-left", "uniform")
    assert conventions.gradients(call, grads["zero"], g, "top-left", "zero") is grads["zero"]
    for name in ("query", "key", "value"):
        assert np.allclose(judged[name], grads["uniform"][name], atol=1e-12), name
    assert not np.allclose(grads["zero"]["value"], grads["uniform"]["value"])


# -- attnzoo check ----------------------------------------------------------------------------

def test_a_uniform_target_is_flagged_by_default():
    code, out, _ = attnzoo("check", UNIFORM, "--depth", "quick", *ROWS)
    assert code == 1 and "empty_rows_are_zero" in flagged(out)


@pytest.mark.parametrize("depth", ["quick", "standard"])
def test_a_uniform_target_is_conformant_when_it_declares_so(depth):
    code, out, _ = attnzoo("check", UNIFORM, "--depth", depth, "--empty-rows", "uniform")
    assert code == 0, out
    assert "empty rows uniform" in out.splitlines()[1] and "— conformant" in out


def test_zeros_are_flagged_under_uniform():
    code, out, _ = attnzoo("check", ZEROS, "--depth", "quick", "--empty-rows", "uniform", *ROWS)
    assert code == 1
    assert {"empty_rows_are_zero", "matches_loop_oracle", "correct_gradients"} <= flagged(out)
    assert "must weigh every key 1/S" in out


@pytest.mark.parametrize("convention", ["zero", "uniform"])
def test_nan_rows_are_flagged_under_every_convention(convention):
    code, out, _ = attnzoo("check", NAN_ROWS, "--depth", "quick", "--empty-rows", convention,
                           "--only", "empty_rows_are_zero")
    assert code == 1 and flagged(out) == {"empty_rows_are_zero"}


def test_the_json_target_carries_the_convention_and_a_module_may_declare_it(tmp_path):
    code, out, _ = attnzoo("check", UNIFORM, "--depth", "quick", "--empty-rows", "uniform",
                           "--only", "empty_rows_are_zero", "--json")
    assert code == 0 and json.loads(out)["implementations"][0]["target"]["empty_rows"] == "uniform"
    code, out, _ = attnzoo("check", "tests/targets/declares_uniform.py:uniform", "--depth",
                           "quick", *ROWS, "--json")
    assert code == 0 and json.loads(out)["implementations"][0]["target"]["empty_rows"] == "uniform"
    code, out, _ = attnzoo("check", ZEROS, "--only", "known_answers", "--json")
    assert json.loads(out)["implementations"][0]["target"]["empty_rows"] == "zero"
    bad = tmp_path / "bad.py"
    bad.write_text("import torch.nn.functional as F\n\n\ndef sdpa(*args, **kwargs):\n"
                   "    return F.scaled_dot_product_attention(*args, **kwargs)\n\n\n"
                   "ATTNZOO_EMPTY_ROWS = 'mean'\n", encoding="utf-8")
    code, out, err = attnzoo("check", f"{bad}:sdpa", "--only", "known_answers")
    assert code == 2 and "ATTNZOO_EMPTY_ROWS must be one of 'zero', 'uniform'" in err


# -- the pytest plugin ------------------------------------------------------------------------

def test_the_plugin_takes_the_convention(pytester):
    pytester.makepyfile(uniform_rows=(REPO / "tests/targets/uniform_rows.py").read_text())
    args = ["-p", "no:cacheprovider", "--attnzoo-target", "uniform_rows:uniform",
            "--attnzoo-depth", "quick", "--attnzoo-only", "empty_rows_are_zero"]
    declared = pytester.runpytest_subprocess(*args, "--attnzoo-empty-rows", "uniform",
                                             timeout=300)
    declared.assert_outcomes(passed=1)
    pytester.runpytest_subprocess(*args, timeout=300).assert_outcomes(failed=1)
    bad = pytester.runpytest_subprocess(*args, "--attnzoo-empty-rows", "mean", timeout=300)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "--attnzoo-empty-rows" in bad.stderr.str()


# -- the survey -------------------------------------------------------------------------------

def test_jax_and_keras_declare_the_uniform_convention_with_a_link():
    for adapter in (jax_nn, keras_numpy, keras_torch):
        decl = adapter.DECLARATION
        assert decl.empty_rows == "uniform" and decl.empty_rows_docs.startswith("https://")
    with pytest.raises(ValueError, match="empty_rows 'mean'"):
        Declaration("lib", "lib.attention", "lib", "lib", empty_rows="mean")
    with pytest.raises(ValueError, match="without empty_rows_docs"):
        Declaration("lib", "lib.attention", "lib", "lib", empty_rows="uniform")


def test_the_survey_page_shows_conventions_apart_from_the_flagged_counts():
    summary = {"flagged": 2, "passed": 9, "not_applicable": 1}
    one = {"dtype": "float32", "summary": summary, "cases_set_aside": [],
           "detectors_not_run": [], "findings": []}
    row = {"name": "lib", "title": "lib.attention", "adapter": "lib", "docs": "", "version": "1",
           "skipped": "", "unsupported": [], "refuses": [], "causal_alignment": "top-left",
           "runs": [one]}
    doc = {"seed": 0, "python": "3", "platform": "x", "implementations": [dict(row)]}
    old = write.markdown(doc)  # recorded before conventions were declared: no column
    assert "conventions |" not in old and "| lib (lib.attention) | 1 | none | 2 flagged" in old
    row.update(empty_rows="uniform", empty_rows_docs="https://example.org/lib")
    page = write.markdown({**doc, "implementations": [row]})
    assert "| implementation | version | declared unsupported | conventions | float32 |" in page
    assert "| lib (lib.attention) | 1 | none | empty rows [uniform](https://example.org/lib) | " \
        "2 flagged" in page
    assert "weight 1/S on each of the S keys" in page


def test_the_survey_runs_each_adapter_with_its_declaration(monkeypatch):
    used = []

    class Refusing:  # the worker the survey would start: it records the target it is given
        def __init__(self, **kwargs):
            pass

        def use(self, target):
            used.append(target)
            raise BadTarget("not here")

        def close(self):
            pass

    monkeypatch.setattr(run, "Isolated", Refusing)
    with pytest.raises(run.Skip):
        run.run_one("jax_nn", jax_nn.DECLARATION, "float32", 0)
    assert used[0].empty_rows == "uniform"
    assert run.implementation("jax_nn", jax_nn.DECLARATION, [], 0)["empty_rows"] == "uniform"
