"""The survey's adapters give known answers, so an adapter mistake cannot pose as a finding.

Every adapter runs in a sandbox worker of its own (keras takes one backend per process), on
the lesson's seed-000 example and on random calls checked against reference/sdpa.py in
float64; a library that is not installed is skipped with a line saying so.
"""

import json

import numpy as np
import pytest

from attnzoo.cli import main
from attnzoo.sandbox.isolated import Isolated
from attnzoo.sandbox.target import BadTarget, Target
from attnzoo.survey import adapters, run, write
from attnzoo.survey.capabilities import VOCABULARY, Declaration, features, supported
from detectors.kit import lessons
from detectors.kit.battery import Battery
from detectors.kit.calls import Request
from detectors.kit.capabilities import layout
from detectors.kit.layout import heads_last
from reference.sdpa import scaled_dot_product_attention as reference

DECLARED = adapters.declarations()
# libraries that compute softmax in float32 whatever the input agree to about 1e-6; an adapter
# mistake (a wrong transpose, an inverted mask) is off by the size of the values themselves
TOLERANCE = 1e-4
# the library's own failures on these calls, reproduced without the adapter: not adapter bugs
LIBRARY_FAILURES = {
    ("hf-flex", "bool_mask"): "torch's compiled CPU flex kernel traces score_mod with (q, 1) and "
    "(1, kv) index tensors, so transformers' chained score_mask[b][0][q][kv] writes outside "
    "its buffer (SIGABRT or garbage)",
    ("hf-flex", "float_mask"): "the same out-of-bounds kernel, with a float attention_mask",
}


@pytest.fixture(scope="module", params=DECLARED, ids=[d.name for _, d in DECLARED])
def adapter(request):
    module, decl = request.param
    if decl.version() is None:
        pytest.skip(f"{decl.name}: {decl.distribution} is not installed ({decl.install})")
    executor = Isolated(call_seconds=decl.call_seconds, load_seconds=120)
    try:
        executor.use(Target(decl.name, adapters.locator(module), "sdpa", "torch"))
    except BadTarget as e:
        executor.close()
        pytest.skip(f"{decl.name}: {decl.distribution} is installed but cannot load here: {e}")
    yield decl, executor
    executor.close()


def call(decl, executor, q, k, v, dtype="float64", **kwargs):
    """The adapter's answer in (N, H, L, Ev); one declaring ``layout=BLHE`` is sent (N, L, H, E)
    and answers so, as the harness sends it (detectors.kit.layout)."""
    blhe = layout(decl.unsupported) == "BLHE"
    if blhe:
        q, k, v = (heads_last(a) for a in (q, k, v))
    out = executor.run(Request("sdpa", (q, k, v), kwargs, dtype=dtype)).values[0]
    return heads_last(out) if blhe else out  # the same transpose takes it back


def test_seed_000_example(adapter):
    decl, executor = adapter
    q, k, v = (a[None, None] for a in (lessons.Q000, lessons.K, lessons.V))  # (1, 1, 3, 2)
    dtype = "float64" if "float64" in decl.dtypes else "float32"
    out = call(decl, executor, q, k, v, dtype)
    # «кошка=0.40, пьёт=0.20, молоко=0.40 … выход -> [6.02, 3.98]»
    assert np.allclose(np.round(out[0, 0], 2), lessons.OUT000_PRINTED)
    assert np.allclose(out[0, 0], lessons.OUT000_EXACT, atol=TOLERANCE * 10)


def random_case(rng, heads_kv=3, heads=3):
    """Q, K, V of one head size and L = S, so that every adapter can take them."""
    q = rng.standard_normal((2, heads, 4, 4))
    k, v = (rng.standard_normal((2, heads_kv, 4, 4)) for _ in range(2))
    keep = rng.random((2, 1, 4, 4)) < 0.6
    keep[..., 0] = True  # every row keeps a key: no row without an allowed key here
    return q, k, v, keep


def expected(q, k, v, **kwargs):
    import torch

    kw = {n: torch.from_numpy(a) if isinstance(a, np.ndarray) else a for n, a in kwargs.items()}
    return reference(*(torch.from_numpy(a) for a in (q, k, v)), **kw).numpy()


@pytest.mark.parametrize("case", ["plain", "bool_mask", "float_mask", "gqa", "scale"])
def test_random_call_matches_the_reference(adapter, case):
    decl, executor = adapter
    rng = np.random.default_rng(7)
    q, k, v, keep = random_case(rng, heads_kv=1 if case == "gqa" else 3,
                                heads=2 if case == "gqa" else 3)
    kwargs = {"bool_mask": {"attn_mask": keep},
              "float_mask": {"attn_mask": np.where(keep, rng.standard_normal(keep.shape), -9.0)},
              "gqa": {"enable_gqa": True}, "scale": {"scale": 0.375}, "plain": {}}[case]
    if case in decl.unsupported or ("per_head_mask" in decl.unsupported and case == "gqa"):
        pytest.skip(f"{decl.name} declares {case} unsupported")
    if (decl.name, case) in LIBRARY_FAILURES:
        pytest.xfail(LIBRARY_FAILURES[decl.name, case])
    dtype = "float64" if "float64" in decl.dtypes else "float32"
    out = call(decl, executor, q, k, v, dtype, **kwargs)
    assert np.allclose(out, expected(q, k, v, **kwargs), atol=TOLERANCE), \
        f"{decl.name} ({decl.title}) disagrees with the reference on a plain {case} call"


def test_declarations_use_the_vocabulary_only():
    assert len(DECLARED) >= 8
    for _, decl in DECLARED:
        assert decl.unsupported <= set(VOCABULARY)
        assert decl.name and decl.title and decl.distribution
    with pytest.raises(ValueError, match="unknown capability"):
        Declaration("x", "x", "x", "x", unsupported=frozenset({"wings"}))


def test_features_name_what_a_battery_call_uses():
    by_name = {c.name: c for c in Battery(0).calls("sdpa")}
    assert {"gqa", "e_ne_ev"} <= features(by_name["gqa"])
    assert "rank_other_than_4" in features(by_name["rank5"])
    assert {"is_causal", "is_causal_rectangular", "rectangular"} <= features(by_name["causal-wide"])
    assert "per_head_mask" in features(by_name["heads-per-head-mask"])
    assert "per_head_mask" not in features(by_name["heads-shared-mask"])
    assert "float_mask" in features(by_name["float-mask"])
    flash = dict(DECLARED)["torch_sdpa_flash"]
    assert not supported(flash, by_name["rank5"])


def test_a_missing_library_is_skipped_with_a_line_saying_so():
    ghost = Declaration("ghost", "ghost attention", "no-such-distribution-attnzoo", "ghost")
    row = run.implementation("ghost", ghost, None, 0)
    assert row["runs"] == [] and row["version"] is None
    assert row["skipped"].startswith("no-such-distribution-attnzoo is not installed: pip install")
    assert run.line(row).split()[-1] != "" and "skipped:" in run.line(row)
    assert "Skipped: no-such-distribution-attnzoo is not installed" in write.markdown(
        {"seed": 0, "python": "3", "platform": "p", "implementations": [row]})


def test_an_unknown_name_is_bad_input(capsys):
    assert main(["survey", "--only", "no-such-attention"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-attention" in err[0] and "torch-sdpa-math" in err[0]


def test_survey_end_to_end_writes_json_and_markdown(tmp_path, capsys):
    assert main(["survey", "--only", "torch-sdpa-math", "--dtype", "float32",
                 "--output-dir", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "survey.json").read_text())
    assert doc["schema"] == run.SCHEMA
    (row,) = doc["implementations"]
    assert row["name"] == "torch-sdpa-math" and row["version"]
    (one,) = row["runs"]
    assert one["dtype"] == "float32" and one["summary"]["flagged"] == 0
    assert one["summary"]["passed"] > 10  # the math backend is SDPA itself: clean, and checked
    md = (tmp_path / "survey.md").read_text()
    assert "| torch-sdpa-math (" in md and "No detector flagged it." in md
    assert "torch-sdpa-math" in capsys.readouterr().out


def test_committed_survey_is_current_with_its_json():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "docs"
    doc = json.loads((root / "survey.json").read_text(encoding="utf-8"))
    assert doc["schema"] == run.SCHEMA
    ran = [r for r in doc["implementations"] if r["runs"]]
    assert len(ran) >= 8, "docs/survey.json should cover at least eight implementations"
    assert all(r["version"] for r in ran)
    assert (root / "survey.md").read_text(encoding="utf-8") == write.markdown(doc), \
        "docs/survey.md differs from what docs/survey.json gives: run 'attnzoo survey'"


def test_cases_refused_at_run_time_are_marked_refused():
    finding = {"detector": "matches_loop_oracle", "verdict": "survived", "refusal": False,
               "message": "[matches_loop_oracle] held on every supported case",
               "evidence": None,
               "unsupported": {"gqa": "refused: raised RuntimeError: No available kernel",
                               "rank5": "declared unsupported: rank_other_than_4"}}
    summary = {"flagged": 0, "passed": 1, "not_applicable": 0, "unsupported": 0,
               "cases_unsupported": 2}
    one = {"dtype": "float32", "summary": summary, "cases_set_aside": ["rank5"],
           "detectors_not_run": [], "findings": [finding]}
    assert write.cell(one).endswith("(2 cases set aside, 1 refused)")
    row = {"name": "lib", "title": "lib.attention", "adapter": "lib", "docs": "", "version": "1",
           "skipped": "", "unsupported": ["rank_other_than_4"], "refuses": [],
           "causal_alignment": "top-left", "runs": [one]}
    md = write.markdown({"seed": 0, "python": "3", "platform": "x", "implementations": [row]})
    assert "Refused at run time: gqa." in md and "A *refused* case is one the library" in md


@pytest.fixture(scope="module")
def flex_eager():
    decl = dict(DECLARED)["hf_flex_eager"]
    if decl.version() is None:
        pytest.skip(f"{decl.name}: {decl.distribution} is not installed ({decl.install})")
    executor = Isolated(call_seconds=decl.call_seconds, load_seconds=120)
    try:
        executor.use(Target(decl.name, adapters.locator("hf_flex_eager"), "sdpa", "torch"))
    except BadTarget as e:
        executor.close()
        pytest.skip(f"{decl.name}: {decl.distribution} is installed but cannot load here: {e}")
    yield decl, executor
    executor.close()


@pytest.mark.parametrize("shape", [(4, 6), (1, 6), (3, 1, 1, 6), (1, 1, 4, 6), (3, 1, 4, 6)])
def test_flex_takes_every_mask_sdpa_broadcasts(flex_eager, shape):
    """transformers indexes score_mask[b][0][q][kv]: the adapter expands a broadcast mask."""
    decl, executor = flex_eager
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s) for s in ((3, 2, 4, 5), (3, 2, 6, 5), (3, 2, 6, 7)))
    keep = rng.random(shape) < 0.6
    keep[..., 0] = True
    out = call(decl, executor, q, k, v, "float32", attn_mask=keep)
    assert np.allclose(out, expected(q, k, v, attn_mask=keep), atol=TOLERANCE), shape


def test_flex_per_head_mask_answer_is_the_library_s_own(flex_eager):
    """The adapter's answer on a per-head float mask is transformers' own, called directly: a
    divergence there is the library's, not the adapter's."""
    import torch
    from transformers.integrations.flex_attention import flex_attention_forward

    decl, executor = flex_eager
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 4, 3, 5)) for _ in range(3))  # (N, H, L, E)
    bias = rng.standard_normal((2, 4, 3, 3))  # (N, H, L, S): differs between heads
    out = call(decl, executor, q, k, v, "float32", attn_mask=bias)
    module = torch.nn.Module().eval()
    module.num_key_value_groups = 1
    t = [torch.tensor(a, dtype=torch.float32) for a in (q, k, v, bias)]
    with torch.compiler.set_stance("force_eager"):
        direct, _ = flex_attention_forward(module, *t)  # (N, L, H, Ev)
    assert np.allclose(out, direct.transpose(1, 2).numpy(), atol=1e-6)
    # and the mask reaches it: head 0 is SDPA's answer with head 0's mask
    assert np.allclose(out[:, 0], expected(q, k, v, attn_mask=bias)[:, 0], atol=TOLERANCE)
