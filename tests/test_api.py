"""``attnzoo.check(...)``: the Python API a kernel-generating pipeline calls (docs/api.md).

Each check here runs the real worker on a few detectors at ``depth="quick"``; the functions
under test are defined in this module, in a fake notebook cell and in source strings, and none
of them is ever called in this process (``CALLS_HERE`` counts calls where it would be seen).
"""

import json
import linecache
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import attnzoo
from attnzoo import carry

REPO = Path(__file__).resolve().parents[1]
QUICK = dict(depth="quick", only=["known_answers", "causality"])
CALLS_HERE = 0  # the correct function counts its calls: in the worker's copy of it, never here
HEAD_AXIS = -1


def _head_size(x):
    return x.shape[HEAD_AXIS]


def correct_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False):
    """torch's own kernel with the scale spelt out: conformant by construction."""
    global CALLS_HERE
    import torch.nn.functional as F

    CALLS_HERE += 1
    if scale is None:
        scale = 1.0 / math.sqrt(_head_size(query))
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                          dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa)


def scaled_by_d(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                enable_gqa=False):
    """Scores divided by d instead of √d: the lessons' worked examples come out wrong."""
    import torch.nn.functional as F

    if scale is None:
        scale = 1.0 / _head_size(query)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                          dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa)


SOURCE = '''
import torch.nn.functional as F


def right(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                          dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa)


def ignores_mask(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                 enable_gqa=False):
    return F.scaled_dot_product_attention(query, key, value, dropout_p=dropout_p,
                                          is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
'''

LESSON = '''
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ V, weights
'''


@pytest.fixture(scope="module")
def correct():
    return attnzoo.check(correct_sdpa, **QUICK)


def test_a_correct_function_is_conformant(correct):
    assert (correct.conformant, correct.exit_code) == (True, 0), correct.text()
    assert correct.target == f"{__name__}.correct_sdpa"
    assert [(f.detector, f.verdict, f.passed) for f in correct.findings] == \
        [("known_answers", "survived", True), ("causality", "survived", True)]
    assert correct.flagged == () and correct.diagnosis == () and not correct.incomplete
    assert correct.text().splitlines()[-1].endswith("— conformant")


def test_the_function_is_never_called_in_the_callers_process(correct):
    assert correct.to_json()["summary"]["calls"] > 0  # it ran, in the worker
    assert CALLS_HERE == 0


def test_a_wrong_function_is_flagged_and_reproduced(tmp_path):
    report = attnzoo.check(scaled_by_d, **QUICK, repro_dir=tmp_path)
    assert (report.conformant, report.exit_code) == (False, 1), report.text()
    [flagged] = report.flagged
    assert (flagged.detector, flagged.verdict, flagged.implementation) == \
        ("known_answers", "killed", f"{__name__}.scaled_by_d")
    assert flagged.expected and flagged.actual and flagged.call.startswith("f(query")
    assert "impl = module.scaled_by_d" in flagged.snippet
    # two detectors ran, one flagged: the entries it resembles are those flagged the same way
    assert report.resembles and all(r.shared == ("known_answers",) and r.similarity == 1
                                    and (REPO / r.page).exists() for r in report.resembles)
    [cause] = report.diagnosis
    assert cause.smallest_detector == "known_answers" and cause.reproduction.reproduces
    # the module stays beside the scripts that import it; the temporary copy is gone
    module = tmp_path / "scaled_by_d.py"
    assert module.read_text().startswith(carry.HEADER)
    assert cause.reproduction.file == str(tmp_path / "01-known_answers.py")
    assert str(module) in Path(cause.reproduction.file).read_text()


def test_a_notebook_cell_is_read_through_linecache(monkeypatch):
    """IPython keeps each cell's text in linecache under a name of its own, as here."""
    cell = ("import torch.nn.functional as F\n\n"
            "def cell_attention(query, key, value, attn_mask=None, dropout_p=0.0,\n"
            "                   is_causal=False, scale=None, enable_gqa=False):\n"
            "    return F.scaled_dot_product_attention(query, key, value, dropout_p=dropout_p,\n"
            "                                          is_causal=is_causal, scale=scale)\n")
    filename = "<ipython-input-3-0123456789ab>"
    monkeypatch.setitem(linecache.cache, filename, (len(cell), None, cell.splitlines(True),
                                                    filename))
    namespace = {"__name__": "__main__"}
    exec(compile(cell, filename, "exec"), namespace)  # defines it; nothing calls it here
    report = attnzoo.check(namespace["cell_attention"], **QUICK)
    assert report.target == "cell_attention"
    assert report.exit_code == 1 and "known_answers" in [f.detector for f in report.flagged]


def test_a_function_without_source_is_refused_with_what_to_do():
    namespace = {"__name__": "__main__"}
    exec(compile("def attn(query, key, value):\n    return query\n", "<generated>", "exec"),
         namespace)
    with pytest.raises(attnzoo.BadInput, match=r"cannot read the source of attn .*save it to a "
                       r"file and pass 'file\.py:attn'"):
        attnzoo.check(namespace["attn"])


def test_what_cannot_be_carried_is_refused():
    import functools

    def closure():
        scale = 2.0

        def inner(query, key, value):
            return query * scale
        return inner

    with pytest.raises(attnzoo.BadInput, match="closes over scale"):
        attnzoo.check(closure())
    with pytest.raises(attnzoo.BadInput, match="lambda"):
        attnzoo.check(lambda q, k, v: q)
    with pytest.raises(attnzoo.BadInput, match="not a Python function.*save it to a file"):
        attnzoo.check(functools.partial(correct_sdpa, scale=1.0))


def test_a_bad_contract_is_refused():
    with pytest.raises(attnzoo.BadInput, match=r"contract must be 'sdpa' .*, 'lesson' .* or "
                                               r"'varlen' .*not 'flash'"):
        attnzoo.check(correct_sdpa, "flash")
    with pytest.raises(attnzoo.BadInput, match="backend must be 'torch'"):
        attnzoo.check(correct_sdpa, backend="numpy")
    with pytest.raises(attnzoo.BadInput, match="names a module, which is checked by the lesson "
                                               "contract"):
        attnzoo.check("zoo/no_scaling.py")


def test_options_are_checked_and_named_as_keywords():
    with pytest.raises(attnzoo.BadInput, match="^budget_s must be a positive number"):
        attnzoo.check(correct_sdpa, budget_s=-1)
    with pytest.raises(attnzoo.BadInput, match="^depth must be one of quick"):
        attnzoo.check(correct_sdpa, depth="huge")
    with pytest.raises(attnzoo.BadInput, match="unknown detector 'nope'"):
        attnzoo.check(correct_sdpa, only="nope")


def test_a_source_string_checks_the_named_function():
    report = attnzoo.check(SOURCE, name="right", **QUICK)
    assert (report.target, report.exit_code, report.conformant) == ("right", 0, True), \
        report.text()
    assert report.to_json()["implementations"][0]["target"]["locator"].endswith("right.py:right")


def test_which_function_of_a_source_is_checked():
    assert carry.is_source(SOURCE) and carry.is_source("def f(q, k, v): return q")
    assert not carry.is_source("pkg.mod:func") and not carry.is_source("zoo/no_scaling.py")
    assert carry.from_source(SOURCE, "sdpa").function == "ignores_mask"  # the last def
    assert carry.from_source(SOURCE, "sdpa", "right").function == "right"
    with pytest.raises(attnzoo.BadInput, match="defines no top-level 'left'"):
        carry.from_source(SOURCE, "sdpa", "left")
    with pytest.raises(attnzoo.BadInput, match="defines no top-level function"):
        carry.from_source("import torch\n", "sdpa")
    with pytest.raises(attnzoo.BadInput, match="does not parse: line 1"):
        carry.from_source("def f(:\n", "sdpa")


def test_a_lesson_source_is_checked_as_a_module():
    report = attnzoo.check(LESSON, "lesson", depth="quick", only=["known_answers"])
    target = report.to_json()["implementations"][0]["target"]
    assert (target["contract"], target["backend"]) == ("lesson", "numpy")
    assert report.exit_code == 0, report.text()


def test_the_budget_is_a_deadline_that_says_what_it_reached():
    report = attnzoo.check(correct_sdpa, budget_s=0.001, **QUICK)
    assert (report.exit_code, report.conformant, report.incomplete) == (4, False, True)
    assert report.not_run == ("known_answers", "causality")
    assert report.to_json()["deadline"] == report.to_json()["budget"] == 0.001
    assert report.reached == {}  # the time ran out while importing it: nothing was reached
    report = attnzoo.check(correct_sdpa, budget_s=300, **QUICK)
    reached = report.reached[f"{__name__}.correct_sdpa"]
    assert set(reached["tiers"]["quick"]) == {"known_answers", "causality"}
    assert reached["unreached"] == {} and 0 < reached["values"] <= reached["of"]
    assert report.conformant and not report.incomplete


def test_a_deadline_is_its_own_keyword():
    report = attnzoo.check(correct_sdpa, deadline_s=0.001, **QUICK)
    assert report.exit_code == 4 and report.to_json()["budget"] is None
    assert report.reached == {}
    with pytest.raises(attnzoo.BadInput, match="give budget_s or deadline_s, not both"):
        attnzoo.check(correct_sdpa, budget_s=5, deadline_s=5)


def untimed(value):
    """The document without what differs from run to run: how long things took."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in ("seconds", "impl_seconds")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def test_a_locator_gives_the_command_lines_document_and_text(monkeypatch):
    locator, argv = "zoo/no_scaling.py:SDPA", ["--only", "known_answers", "--only", "causality",
                                                "--depth", "quick"]
    monkeypatch.chdir(REPO)
    report = attnzoo.check(locator, **QUICK)
    cli = [subprocess.run([sys.executable, "-m", "attnzoo", "check", locator, *argv, *json],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
           for json in (["--json"], [])]
    assert [p.returncode for p in cli] == [report.exit_code] * 2 == [1, 1]
    document, mine = json.loads(cli[0].stdout), report.to_json()
    assert mine.keys() == document.keys()
    for key in set(document) - {"seconds"}:
        assert untimed(mine[key]) == untimed(document[key]), key
    timing = re.compile(r" in \d+\.\d s — ")
    assert timing.sub(" in T s — ", report.text()) == \
        timing.sub(" in T s — ", cli[1].stdout.rstrip("\n"))


def test_import_attnzoo_stays_light():
    code = ("import attnzoo, sys; assert 'torch' not in sys.modules and 'attnzoo.api' not in "
            "sys.modules; import attnzoo.checking; assert callable(attnzoo.check); "
            "assert attnzoo.Report.__name__ == 'Report'")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
