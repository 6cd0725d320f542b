"""``attnzoo check --contract varlen``, its API, its pytest items and the grade's `varlen` fixture.

The kernel runs in a confined worker and the varlen detectors in attnzoo's process, calling it
through the relay: bugs of zoo/varlen are flagged by the detectors their metadata names, the
reference and the decoys come out conformant at every dtype, a hang, a crash, a raise and a file
write are verdicts that leave nothing running, and bad input is one line with exit 2. Most runs
choose a few detectors (``--only``) or one dtype to keep the file fast; the reference, the
decoys and one bug are checked in full.
"""

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from test_cli import PYTHON, REPO, one_error_line, only
from test_cli import attnzoo as in_process
from test_isolation import Run, strict_only

import detectors
import zoo.varlen as varlen_zoo
from attnzoo import api, options

pytest_plugins = ["pytester"]

HERE = "tests/targets/varlen"
CHECK = (PYTHON, "-m", "attnzoo")  # this tree's attnzoo, whatever is installed
NAMES = [d.NAME for d in detectors.varlen_detectors()]
BUGS = {e.id: e for e in varlen_zoo.BUGS}


def locator(entry):
    return f"{entry.path.relative_to(REPO)}:{varlen_zoo.ATTRIBUTE}"


def check(tmp_path, *args, timeout=300):
    """``attnzoo check --contract varlen ARGS --json`` in a session of its own; (process,
    document, the Run whose mark and TMPDIR it had): for the runs whose leftovers are checked."""
    run = Run(tmp_path)
    p, doc = run.check(*args, "--contract", "varlen", command=CHECK, timeout=timeout)
    return p, doc, run


def quick(*args):
    """The same in this process (no interpreter to start): (what it left, the document)."""
    done = in_process("check", *args, "--contract", "varlen", "--json")
    return done, json.loads(done.stdout) if done.stdout.strip() else None


def verdicts(doc):
    return {f["detector"]: f["verdict"] for f in doc["implementations"][0]["findings"]}


def flagged(doc):
    return {n for n, v in verdicts(doc).items() if v in ("killed", "nan", "crashed", "hung")}


# -- verdicts on the zoo ------------------------------------------------------------------------


def declared(entry):
    """The command line's flags for what a decoy declares (its module's CONVENTIONS)."""
    said = varlen_zoo.conventions(entry)
    spelt = {"empty_rows": ("--empty-rows", options.VARLEN_EMPTY_ROWS),
             "window_counting": ("--window-counting", options.WINDOW_COUNTINGS)}
    return [a for field, value in said.items() for a in (
        spelt[field][0], next(k for k, v in spelt[field][1].items() if v == value))]


CLEAN = [("reference", "reference/varlen.py:attn_varlen", [])] + [
    (e.id, locator(e), declared(e)) for e in varlen_zoo.DECOYS]
CONVENTION_DECOYS = [e for e in varlen_zoo.DECOYS if declared(e)]


@pytest.mark.parametrize("name,where,flags", CLEAN, ids=[n for n, _, _ in CLEAN])
def test_the_reference_and_the_decoys_are_conformant_at_every_dtype(name, where, flags):
    p, doc = quick(where, *flags)
    assert p.returncode == 0, p.stderr[-2000:]
    assert set(verdicts(doc)) == set(NAMES) and set(verdicts(doc).values()) == {"survived"}
    assert doc["implementations"][0]["target"]["dtypes"] == ["float64", "float32", "float16",
                                                             "bfloat16"]
    assert doc["summary"]["conformant"] and doc["exit_code"] == 0


# one bug of each style (a per-sequence loop, paged tiles, a split-KV merge), with a detector
# its metadata does not name beside those it does; and the two that only views show, so the
# relay must carry each tensor's strides and storage offset to the kernel
SAMPLE = ("varlen-causal-top-left", "varlen-page-position-from-physical-block",
          "varlen-split-kv-reads-padded-length", "varlen-window-one-key-too-wide",
          "varlen-strides-from-shape", "varlen-storage-offset-ignored")


@pytest.mark.parametrize("bug", SAMPLE)
def test_a_bug_is_flagged_by_exactly_the_detectors_its_metadata_names(bug):
    entry = BUGS[bug]
    other = next(n for n in NAMES if n not in entry.meta.caught_by)
    p, doc = quick(locator(entry), *only(*entry.meta.caught_by, other),
                      "--dtype", "float64")
    assert p.returncode == 1
    assert flagged(doc) == set(entry.meta.caught_by)
    assert verdicts(doc)[other] == "survived"
    assert not doc["summary"]["conformant"]


@pytest.mark.parametrize("entry", CONVENTION_DECOYS, ids=[e.id for e in CONVENTION_DECOYS])
def test_an_undeclared_convention_is_named_by_its_probe(entry):
    """The same decoy, its convention left undeclared: the probe names what it follows."""
    probe = ("window_counting_convention" if "--window-counting" in declared(entry)
             else "empty_row_convention")
    p, doc = quick(locator(entry), "--dtype", "float64", *only(probe))
    assert p.returncode == 1 and flagged(doc) == {probe}
    target = doc["implementations"][0]["target"]
    assert (target["empty_rows"], target["window_counting"]) == ("zero", "inclusive")


def test_a_kernel_without_autograd_is_not_applicable_to_the_gradients_detector():
    p, doc = quick(f"{HERE}/forward_only.py:attn", "--depth", "quick", "--dtype", "float32",
                   *only("gradients_match_reference", "matches_reference"))
    assert p.returncode == 0, doc
    assert verdicts(doc) == {"gradients_match_reference": "n/a",
                             "matches_reference": "survived"}
    assert "does not require grad" in doc["implementations"][0]["findings"][0]["message"]


def test_the_depth_picks_the_harness_tier():
    calls = {}
    for depth in ("quick", "deep"):
        p, doc = quick("reference/varlen.py:attn_varlen", "--depth", depth, "--dtype",
                       "float64", *only("matches_reference"))
        assert p.returncode == 0 and doc["depth"] == depth
        calls[depth] = doc["implementations"][0]["findings"][0]["calls"]
    assert 0 < calls["quick"] < calls["deep"]


def test_a_full_run_of_a_bug_in_text():
    """Without --json: the isolation line, one line per detector, the failing case under each
    flagged one, the summary."""
    entry = BUGS["varlen-causal-top-left"]
    p = in_process("check", locator(entry), "--contract", "varlen", "--dtype", "float64")
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert lines[0].startswith("isolation: ")
    assert "varlen contract, causal alignment bottom-right" in lines[1]
    assert sum(ln.startswith("  FLAGGED ") for ln in lines) == len(entry.meta.caught_by)
    assert sum(ln.startswith("  ok ") for ln in lines) == len(NAMES) - len(entry.meta.caught_by)
    assert "the causal mask follows top-left; the target declares bottom-right" in p.stdout
    assert lines[-1].startswith("summary: ") and lines[-1].endswith("NOT conformant")


def test_a_declared_top_left_kernel_is_judged_top_left():
    entry = BUGS["varlen-causal-top-left"]
    p, doc = quick(locator(entry), "--causal-alignment", "top-left", "--dtype",
                      "float32", *only(*entry.meta.caught_by))
    assert p.returncode == 0, doc
    assert doc["implementations"][0]["target"]["causal_alignment"] == "top-left"


def test_exitfirst_stops_at_the_first_flag():
    entry = BUGS["varlen-causal-top-left"]
    p, doc = quick(locator(entry), "-x", "--dtype", "float64",
                      *only("matches_reference", "padding_is_never_read"))
    assert p.returncode == 1
    assert verdicts(doc) == {"matches_reference": "killed"}
    assert doc["implementations"][0]["not_run"] == ["padding_is_never_read"]
    assert doc["stopped"] == "first flag"


def test_a_deadline_leaves_a_partial_report_and_exit_4():
    p, doc = quick("reference/varlen.py:attn_varlen", "--deadline", "1")
    assert p.returncode == 4 and doc["stopped"] == "deadline"
    impl = doc["implementations"][0]
    assert impl["not_run"] and len(impl["findings"]) + len(impl["not_run"]) == len(NAMES)
    assert not doc["summary"]["conformant"]


# -- what the kernel does to the run ------------------------------------------------------------


def test_a_hang_is_a_verdict_and_the_worker_is_killed(tmp_path):
    p, doc, run = check(tmp_path, f"{HERE}/hangs.py:attn", "--timeout", "1", "--dtype",
                        "float64", *only("window_is_a_key_slice", "causal_diagonal_convention"))
    assert p.returncode == 1
    assert verdicts(doc) == {"window_is_a_key_slice": "hung",
                             "causal_diagonal_convention": "survived"}
    message = doc["implementations"][0]["findings"][0]["message"]
    assert "no answer within 1 s during" in message and "--timeout" in message
    assert run.left() == []


def test_a_crash_is_a_verdict_and_the_next_detector_gets_a_new_worker(tmp_path):
    p, doc, run = check(tmp_path, f"{HERE}/segfaults.py:attn", "--dtype", "float64",
                        *only("matches_reference", "causal_diagonal_convention",
                              "page_placement_invariance"))
    assert p.returncode == 1
    assert verdicts(doc) == {"matches_reference": "crashed",
                             "causal_diagonal_convention": "survived",
                             "page_placement_invariance": "crashed"}
    assert "killed by SIGSEGV" in doc["implementations"][0]["findings"][0]["message"]
    assert run.left() == []


@pytest.mark.parametrize("fn,verdict,said", [
    ("raises", "crashed", "raised ValueError: \\x1b[31mno varlen here"),
    ("exits", "crashed", "sys.exit(3)"),
    ("wrong_dtype", "killed", "out is torch.float32, the input is torch.float64"),
    ("a_string", "killed", "out should be a tensor"),
])
def test_a_raise_or_a_lie_is_a_verdict_its_text_inert(fn, verdict, said):
    p, doc = quick(f"{HERE}/lies.py:{fn}", "--dtype", "float64",
                      *only("matches_reference"))
    assert p.returncode == 1
    assert verdicts(doc) == {"matches_reference": verdict}
    message = doc["implementations"][0]["findings"][0]["message"]
    assert said in message and "\x1b" not in p.stdout


@strict_only
def test_a_file_writing_kernel_writes_nothing_outside_and_leaves_nothing(tmp_path):
    p, doc, run = check(tmp_path, f"{HERE}/writes_outside.py:attn", "--dtype", "float64",
                        *only("matches_reference"))
    assert p.returncode == 1
    assert verdicts(doc) == {"matches_reference": "crashed"}
    assert "PermissionError" in doc["implementations"][0]["findings"][0]["message"]
    home = Path(os.path.expanduser("~"))
    assert not (home / f".varlen_{run.mark}").exists()
    assert doc["isolation"]["level"] == "strict"
    assert run.left() == []  # its child and its scratch are gone


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args,said", [
    ([f"{HERE}/lies.py:no_lse"], "signature lacks return_lse"),
    ([f"{HERE}/lies.py:sdpa_signature"], "signature lacks cu_seqlens_q"),
    ([f"{HERE}/lies.py:NOT_CALLABLE"], "is not callable"),
    ([f"{HERE}/lies.py:nothing"], "has no attribute 'nothing'"),
    ([f"{HERE}/missing.py:attn"], "no such file"),
    (["reference/varlen.py:attn_varlen", "--only", "causality"], "unknown varlen detector"),
    (["reference/varlen.py:attn_varlen", "--backend", "torch"], "--backend"),
    (["reference/varlen.py:attn_varlen", "--mask-convention", "drop"], "--mask-convention"),
    (["reference/varlen.py:attn_varlen", "--budget", "10"], "--budget"),
    (["reference/varlen.py:attn_varlen", "--unsupported", "is_causal"], "--unsupported"),
    (["reference/varlen.py:attn_varlen", "--timeout", "0"], "--timeout must be"),
    (["reference/varlen.py:attn_varlen", "--empty-rows", "nan"], "--empty-rows"),
])
def test_bad_input_is_one_line_and_exit_2(args, said):
    p = in_process("check", *args, "--contract", "varlen")
    one_error_line(p)
    assert said in p.stderr


def test_window_counting_is_the_varlen_contracts_alone():
    p = in_process("check", "reference/sdpa.py", "--window-counting", "inclusive")
    one_error_line(p)
    assert "--window-counting is the varlen contract's" in p.stderr


def test_a_varlen_kernel_checked_as_sdpa_is_told_to_add_the_contract():
    """Its signature takes the offsets no SDPA takes: the one line says which contract."""
    p = in_process("check", "reference/varlen.py:attn_varlen", "--depth", "quick")
    line = one_error_line(p)
    assert "takes cu_seqlens_q" in line and line.endswith("add --contract varlen (docs/varlen.md)")
    from reference.varlen import attn_varlen

    with pytest.raises(api.BadInput, match=r"^reference\.varlen\.attn_varlen takes cu_seqlens_q.*"
                       r"add contract='varlen'"):
        api.check(attn_varlen, depth="quick")


def test_contract_names_a_contract_check_knows():
    p = in_process("check", "reference/varlen.py:attn_varlen", "--contract", "flash")
    one_error_line(p)
    assert "--contract" in p.stderr


# -- the API --------------------------------------------------------------------------------------


def test_the_api_returns_the_verdicts_the_command_line_prints():
    entry = BUGS["varlen-window-zero-means-unbounded"]
    chosen = [*entry.meta.caught_by, "causal_diagonal_convention"]
    p, doc = quick(locator(entry), "--dtype", "float64", *only(*chosen))
    report = api.check(str(REPO / locator(entry)), contract="varlen", dtype="float64",
                       only=chosen)
    assert {f.detector: f.verdict for f in report.findings} == verdicts(doc)
    assert report.exit_code == 1 == p.returncode and not report.conformant
    assert report.to_json()["contract"] == "varlen"
    assert "NOT conformant" in report.text()


def test_the_api_checks_a_function_and_refuses_what_varlen_does_not_take():
    source = textwrap.dedent("""
        from reference.varlen import attn_varlen

        def mine(q, k, v, cu_seqlens_q, cu_seqlens_k=None, **kw):
            return attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **kw)
    """)
    report = api.check(source, contract="varlen", only="matches_reference")
    assert report.conformant and report.exit_code == 0
    assert [(f.detector, f.verdict) for f in report.findings] == [("matches_reference",
                                                                   "survived")]
    for bad, said in ((dict(depth="deepest"), "depth"), (dict(backend="numpy"), "backend"),
                      (dict(window_counting="both"), "window_counting must be"),
                      (dict(only="causality"), "unknown varlen detector"),
                      (dict(causal_alignment="middle"), "causal_alignment")):
        with pytest.raises(api.BadInput, match=said):
            api.check(source, contract="varlen", **bad)


# -- the pytest plugin ---------------------------------------------------------------------------


def test_the_plugin_runs_the_varlen_detectors_as_items(pytester):
    entry = BUGS["varlen-causal-top-left"]
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--attnzoo-contract", "varlen", "--attnzoo-dtype", "float64",
        "--attnzoo-target", str(REPO / locator(entry)),
        "--attnzoo-target", str(REPO / "reference/varlen.py:attn_varlen"),
        "--attnzoo-only", "causal_diagonal_convention", "--attnzoo-only", "lse_matches_output",
        "-q", timeout=300)
    result.assert_outcomes(failed=1, passed=3)
    out = result.stdout.str()
    assert "FAILED varlen/causal_diagonal_convention[" in out and "causal_top_left.py" in out
    assert "the causal mask follows top-left; the target declares bottom-right" in out


def test_the_plugin_refuses_a_kernel_without_the_signature(pytester):
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--attnzoo-contract", "varlen",
        "--attnzoo-target", str(REPO / HERE / "lies.py:sdpa_signature"), timeout=120)
    assert result.ret == 4  # pytest's usage error
    assert "signature lacks cu_seqlens_q" in result.stderr.str()


# -- grade: the `varlen` fixture ------------------------------------------------------------------


def test_the_example_varlen_suite_is_graded_without_false_alarms():
    from attnzoo.grade import model
    from attnzoo.grade.run import Suite

    suite = REPO / "tests/targets/grade/varlen_suite.py"
    wanted = {"reference", "varlen-causal-top-left", "varlen-softcap-after-mask",
              "varlen-alibi-sign-reversed", "varlen-page-position-from-physical-block"} | {
        e.id for e in varlen_zoo.DECOYS if not varlen_zoo.conventions(e)}
    doc = model.grade(Suite(suite), select=lambda r: r.id in wanted)
    assert doc["contracts"] == ["varlen"]
    assert {r["id"] for r in doc["rows"]} == wanted
    assert doc["false_alarms"] == []
    caught = {b["id"]: b["caught_by"] for b in doc["bugs"]}
    short = {k: [t.rsplit("::", 1)[1] for t in v] for k, v in caught.items()}
    assert "test_causal_prefill_and_decode_align_bottom_right" in short["varlen-causal-top-left"]
    assert short["varlen-softcap-after-mask"] == ["test_softcap_bends_large_scores"]
    assert short["varlen-page-position-from-physical-block"] == [
        "test_a_paged_cache_equals_the_packed_keys"]
    assert short["varlen-alibi-sign-reversed"] == []  # no test of this suite uses ALiBi
    assert doc["summary"]["canaries"] == 0


def test_the_varlen_fixture_skips_under_another_contract(tmp_path):
    """A suite mixing contracts: each test runs on its own contract's rows only."""
    from attnzoo.grade import model
    from attnzoo.grade.run import Suite

    suite = tmp_path / "test_mixed.py"
    suite.write_text(textwrap.dedent("""
        import torch

        def test_sdpa_shape(sdpa):
            q = torch.randn(1, 1, 2, 4, dtype=torch.float64)
            assert sdpa(q, q, q).shape == q.shape

        def test_varlen_shape(varlen):
            q = torch.randn(3, 1, 4, dtype=torch.float64)
            cu = torch.tensor([0, 3], dtype=torch.int32)
            assert varlen(q, q, q, cu, cu, max_seqlen_q=3, max_seqlen_k=3).shape == q.shape
    """))
    doc = model.grade(Suite(suite), select=lambda r: r.kind == "reference")
    assert doc["contracts"] == ["sdpa", "varlen"]
    cells = {r["backend"]: {t.rsplit("::", 1)[1]: c["cell"] for t, c in r["cells"].items()}
             for r in doc["rows"]}
    assert cells == {"sdpa": {"test_sdpa_shape": "pass", "test_varlen_shape": "na"},
                     "varlen": {"test_sdpa_shape": "na", "test_varlen_shape": "pass"}}


def test_the_grade_command_takes_a_varlen_suite(tmp_path):
    p = subprocess.run([*CHECK, "grade", "tests/targets/grade/varlen_suite.py", "--json",
                        "--reveal"], cwd=REPO, capture_output=True, text=True, timeout=600)
    doc = json.loads(p.stdout)
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["summary"]["false_alarms"] == 0
    assert doc["summary"]["bugs"] == len(varlen_zoo.BUGS)
    assert doc["summary"]["caught"] >= 12


def test_the_plugin_takes_the_declarations_check_takes(pytester):
    """A window convention and what the kernel lacks, declared to the plugin as to check: the
    convention decoy passes the window detectors, what it lacks is skipped, never passed."""
    decoy = next(e for e in varlen_zoo.DECOYS
                 if e.id == "varlen-sliding-window-counts-current-token")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--attnzoo-contract", "varlen", "--attnzoo-dtype", "float64",
        "--attnzoo-target", str(REPO / locator(decoy)),
        "--attnzoo-window-counting", "counts-current-token", "--attnzoo-unsupported", "lse",
        "--attnzoo-only", "window_is_a_key_slice", "--attnzoo-only", "window_counting_convention",
        "--attnzoo-only", "lse_matches_output", "-rs", timeout=300)
    result.assert_outcomes(passed=2, skipped=1)
    assert "unsupported" in result.stdout.str()


def test_the_plugin_tells_a_varlen_kernel_to_add_the_contract(pytester):
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--attnzoo-target", str(REPO / "reference/varlen.py:attn_varlen"),
        timeout=120)
    assert result.ret == 4  # a usage error at collection, not a failure per detector
    assert "takes cu_seqlens_q" in result.stderr.str()
    assert "add --attnzoo-contract varlen" in result.stderr.str()


def test_the_plugin_names_its_own_options_in_a_usage_error(pytester):
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--attnzoo-target", "reference/sdpa.py",
        "--attnzoo-window-counting", "inclusive", timeout=120)
    assert result.ret == 4
    err = result.stderr.str()
    assert "--attnzoo-window-counting is the varlen contract's" in err
    assert "--attnzoo-contract varlen" in err
