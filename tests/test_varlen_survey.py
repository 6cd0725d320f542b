"""``attnzoo survey --contract varlen``: declared conventions are judged as declared, a
divergence is flagged with a reproduction that reproduces it, the committed page is what its
JSON renders to, and the flex adapter gives the reference's answers where flex is right."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnzoo.cli import main
from attnzoo.survey import varlen_adapters, varlen_write
from attnzoo.survey.varlen_adapters import Declaration
from detectors.kit.varlen import battery, reference

ROOT = Path(__file__).resolve().parent.parent
FAKES = "tests/targets/varlen_survey"
SURVEY = [sys.executable, "-m", "attnzoo", "survey", "--contract", "varlen"]


def test_a_declared_convention_is_clean_and_a_divergence_is_flagged_reproducibly(tmp_path):
    p = subprocess.run([*SURVEY, "--only", f"{FAKES}/counts_current_token.py", "--only",
                        f"{FAKES}/lse_plus_inf.py", "--depth", "quick", "--dtype", "float64",
                        "--output-dir", str(tmp_path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "survey-varlen.json").read_text())
    rows = {r["name"]: r for r in doc["implementations"]}
    counting, diverges = rows["fake-counting"]["runs"], rows["fake-lse-plus-inf"]["runs"]
    assert [r["dtype"] for r in counting] == ["float64"] and doc["depth"] == "quick"
    assert counting[0]["summary"]["flagged"] == 0 and counting[0]["summary"]["passed"] == 15
    flagged = {f["detector"]: f for f in diverges[0]["findings"] if f["verdict"] == "killed"}
    assert "empty_row_convention" in flagged, diverges[0]["findings"]
    page = (tmp_path / "survey-varlen.md").read_text()
    command = flagged["empty_row_convention"]["reproduce"]["command"]
    assert command in page and "window counting counts-current-token" in page
    # the reproduction, run as the page prints it, flags the same detector (exit 1)
    rerun = subprocess.run(command.replace("PYTHONPATH=. python", sys.executable).split(),
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 1 and "empty_row_convention" in rerun.stdout, rerun.stdout


def test_the_committed_page_is_what_its_json_renders_to():
    doc = json.loads((ROOT / "docs" / varlen_write.JSON).read_text(encoding="utf-8"))
    page = (ROOT / "docs" / varlen_write.PAGE).read_text(encoding="utf-8")
    assert page == varlen_write.markdown(doc), "run attnzoo survey --contract varlen --render-only"
    assert {r["name"] for r in doc["implementations"]} == {
        d.name for _, d in varlen_adapters.declarations()}


def test_render_only_rewrites_the_page_from_the_json(tmp_path, capsys):
    (tmp_path / varlen_write.JSON).write_text(
        (ROOT / "docs" / varlen_write.JSON).read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["survey", "--contract", "varlen", "--render-only", "--output-dir",
                 str(tmp_path)]) == 0
    assert (tmp_path / varlen_write.PAGE).read_text(encoding="utf-8") == (
        ROOT / "docs" / varlen_write.PAGE).read_text(encoding="utf-8")


@pytest.mark.parametrize("args, said", [
    (["--only", "no-such-library"], "no surveyed varlen implementation 'no-such-library'"),
    (["--render-only", "--output-dir", "{tmp}/empty"], "no "),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, said):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["survey", "--contract", "varlen", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


def test_a_convention_needs_the_link_that_states_it():
    with pytest.raises(ValueError, match="window_counting_docs"):
        Declaration(name="x", title="x", distribution="torch", module="torch", docs="d",
                    converts="nothing", causal_alignment_docs="d", empty_rows_docs="d",
                    window_counting="counts-current-token")
    with pytest.raises(ValueError, match="empty_rows"):
        Declaration(name="x", title="x", distribution="torch", module="torch", docs="d",
                    converts="nothing", causal_alignment_docs="d", empty_rows_docs="d",
                    window_counting_docs="d", empty_rows="nan")


FINITE = ("chunked prefill, GQA", "decode against a shuffled paged cache", "left window",
          "small softcap", "ALiBi per batch row, window", "MQA with every feature")


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("name", FINITE)
def test_the_eager_flex_adapter_gives_the_reference_answer(name):
    """An adapter mistake (a wrong diagonal, a page read wrong, a bias sign) would be off by
    the size of the values: the adapter's answers on finite cases are the reference's."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    from attnzoo.survey.varlen_adapters.flex import attn_varlen

    case = next(c for c in battery(0, "quick") if c.name == name)
    out, lse = attn_varlen(case.q, case.k, case.v, **case.args, return_lse=True)
    want, want_lse = reference(case)
    assert torch.allclose(out, want, atol=1e-10) and torch.equal(torch.isinf(lse),
                                                                   torch.isinf(want_lse))
    finite = torch.isfinite(want_lse)
    assert torch.allclose(lse[finite], want_lse[finite], atol=1e-10)


@pytest.mark.parametrize("module", ["hf_sdpa", "hf_eager"])
def test_the_transformers_adapters_refuse_what_they_declare_unsupported(module):
    """A call that uses a word the adapter declared raises NotImplementedError before the
    library is reached (so this runs without transformers), never drops the argument."""
    adapter = importlib.import_module(f"attnzoo.survey.varlen_adapters.{module}")
    declared = adapter.DECLARATION.unsupported
    case = next(c for c in battery(0, "quick") if c.name == "chunked prefill, GQA")
    uses = {"window_right": dict(window_size=(2, 1)), "softcap": dict(softcap=2.0),
            "lse": dict(return_lse=True)}
    assert {w for w in declared if w in uses} == set(declared)
    for word in declared:
        with pytest.raises(NotImplementedError):
            adapter._attn_varlen(case.q, case.k, case.v, **{**case.args, **uses[word]})


@pytest.mark.parametrize("name, said", [("small softcap", "softcap"),
                                        ("value head of another width", "value head size")])
def test_the_jax_adapter_refuses_what_it_declares_unsupported(name, said):
    """A declared-unsupported argument is refused by name, before JAX is imported, never
    silently dropped (a call without the cap would look like a wrong answer, not a gap)."""
    from attnzoo.survey.varlen_adapters import jax_nn

    case = next(c for c in battery(0, "standard") if name in c.name)
    assert {"softcap": "softcap", "value head size": "dv_ne_d"}[said] in \
        jax_nn.DECLARATION.unsupported
    with pytest.raises(NotImplementedError, match=said):
        jax_nn._attn_varlen(case.q, case.k, case.v, **case.args)
