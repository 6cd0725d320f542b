"""The public pytest plugin (``pytest11`` entry point ``attnzoo``) in a temporary project.

Installed, it must change nothing until ``--attnzoo-target`` is given; given, it collects one item
per detector with the target in its id, carries attnzoo check's evidence into failures, works
with JUnit XML and pytest-xdist, and honours an expectations file strictly.
"""

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from detectors import all_detectors

pytest_plugins = ["pytester"]

GOOD = "from reference.lesson_numpy import causal_mask, softmax, attention, causal_self_attention\n"
BUGGY = ("from zoo.mask_fill_zero import NUMPY as _impl\n"
         "causal_mask, softmax = _impl.causal_mask, _impl.softmax\n"
         "attention, causal_self_attention = _impl.attention, _impl.causal_self_attention\n")
SDPA = "from reference.sdpa import scaled_dot_product_attention as sdpa\n"


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_installed_plugin_changes_nothing_without_the_option(pytester):
    pytester.makepyfile(test_theirs="def test_one():\n    assert True\n")
    result = run(pytester, "--collect-only", "-q")
    assert result.ret == 0
    assert [ln for ln in result.outlines if "::" in ln] == ["test_theirs.py::test_one"]
    helped = run(pytester, "--help")
    assert "--attnzoo-target" in helped.stdout.str()


def test_one_item_per_detector_with_the_target_in_its_id(pytester):
    pytester.makepyfile(myattn=SDPA)
    result = run(pytester, "--attnzoo-target", "myattn:sdpa", "--collect-only", "-q")
    ids = [ln for ln in result.outlines if ln.endswith("[myattn:sdpa]")]
    assert ids == [f"{d.NAME}[myattn:sdpa]" for d in all_detectors()]


def test_failures_carry_the_evidence_and_junit_xml_records_them(pytester):
    pytester.makepyfile(good=GOOD, buggy=BUGGY)
    only = ["--attnzoo-only", "causality", "--attnzoo-only", "known_answers"]
    result = run(pytester, "--attnzoo-target", "good.py", "--attnzoo-target", "buggy.py",
                 *only, "--junitxml=report.xml")
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert "FAILED causality[buggy.py]" in out and "reproduce:" in out
    snippet = out.split("reproduce:", 1)[1].split("\n_", 1)[0].split("\n=", 1)[0]
    code = textwrap.dedent(snippet.split("\n", 1)[1])
    assert f"spec_from_file_location('buggy', {str(pytester.path / 'buggy.py')!r})" in code
    assert "attnzoo" not in code and "detectors" not in code, code  # runs where buggy.py does
    elsewhere = pytester.mkdir("elsewhere")
    ran = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "report.xml").iter("testcase")}
    assert set(cases) == {"causality[good.py]", "known_answers[good.py]",
                          "causality[buggy.py]", "known_answers[buggy.py]"}
    assert cases["causality[buggy.py]"].find("failure") is not None
    assert cases["causality[good.py]"].find("failure") is None


def test_runs_under_xdist(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(buggy=BUGGY)
    only = [a for d in ("causality", "known_answers", "input_immutability", "determinism")
            for a in ("--attnzoo-only", d)]
    result = run(pytester, "-n", "2", "--attnzoo-target", "buggy.py", *only)
    result.assert_outcomes(passed=2, failed=2)
    assert "2 workers" in result.stdout.str()


def test_expectations_xfail_strict_pass_and_unknown_id(pytester):
    pytester.makepyfile(buggy=BUGGY)
    pytester.path.joinpath("known.toml").write_text(
        '[causality]\nreason = "leaks the future, tracked"\nlink = "https://example.org/1"\n'
        '[input_immutability]\nreason = "thought to write into Q"\n', encoding="utf-8")
    only = ["--attnzoo-only", "causality", "--attnzoo-only", "input_immutability",
            "--attnzoo-only", "known_answers"]
    result = run(pytester, "--attnzoo-target", "buggy.py", *only,
                 "--attnzoo-expect", "known.toml", "-rfxX")
    result.assert_outcomes(xfailed=1, failed=2)
    out = result.stdout.str()
    assert "XFAIL causality[buggy.py] - leaks the future, tracked (https://example.org/1)" in out
    assert "expects it to fail (thought to write into Q): remove the entry" in out
    assert "FAILED known_answers[buggy.py]" in out
    pytester.path.joinpath("typo.toml").write_text('[causalty]\nreason = "x"\n',
                                                   encoding="utf-8")
    bad = run(pytester, "--attnzoo-target", "buggy.py", "--attnzoo-expect", "typo.toml")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "[causalty] matches no detector" in bad.stderr.str()


def test_check_honours_the_same_expectations_file(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    known = tmp_path / "known.toml"
    known.write_text('[causality]\nreason = "tracked"\n', encoding="utf-8")
    cmd = [sys.executable, "-m", "attnzoo", "check", "zoo/mask_fill_zero.py:NUMPY",
           "--only", "causality", "--expect", str(known)]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "xfail  causality on zoo/mask_fill_zero.py:NUMPY: tracked" in done.stdout
    assert "— conformant with 1 expected failure\n" in done.stdout, done.stdout
    passing = [sys.executable, "-m", "attnzoo", "check", "reference/lesson_numpy.py",
               "--only", "causality", "--expect", str(known)]
    done = subprocess.run(passing, cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "XPASS  causality" in done.stdout
    assert "conformant with" not in done.stdout, done.stdout


def test_the_header_counts_the_items_and_a_declared_limit_is_skipped(pytester):
    """"collected 0 items" above 30 results reads as a broken run; a detector whose every case
    uses what the target declares unsupported did not pass, it did not run."""
    pytester.makepyfile(nogqa="import torch.nn.functional as F\n"
                        "def sdpa(*args, **kwargs):\n"
                        "    return F.scaled_dot_product_attention(*args, **kwargs)\n"
                        "ATTNZOO_UNSUPPORTED = ['gqa']\n")
    only = [a for d in ("causality", "gqa_head_mapping") for a in ("--attnzoo-only", d)]
    result = run(pytester, "--attnzoo-target", "nogqa:sdpa", *only, "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    out = result.stdout.str()
    assert "collected 2 items" in out
    assert "SKIPPED" in out and "every case is outside what the target supports" in out


def test_a_limit_declared_on_the_command_line_is_skipped_as_a_declared_one(pytester):
    """``--attnzoo-unsupported`` is ``attnzoo check --unsupported``: the same words, the same
    outcome as ATTNZOO_UNSUPPORTED in the module."""
    pytester.makepyfile(plain="import torch.nn.functional as F\n"
                        "def sdpa(*args, **kwargs):\n"
                        "    return F.scaled_dot_product_attention(*args, **kwargs)\n")
    only = [a for d in ("causality", "gqa_head_mapping") for a in ("--attnzoo-only", d)]
    result = run(pytester, "--attnzoo-target", "plain:sdpa", "--attnzoo-unsupported", "gqa",
                 *only, "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    assert "every case is outside what the target supports" in result.stdout.str()


def test_a_failure_says_what_its_cases_share_and_the_run_ends_with_the_diagnosis(pytester):
    """GQA read as one KV head per query head: every failing case uses enable_gqa, and the
    end of the run names it as the root cause, as ``attnzoo check`` opens with it."""
    pytester.makepyfile(nogqa=(
        "import torch.nn.functional as F\n"
        "def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,\n"
        "         enable_gqa=False):\n"
        "    if enable_gqa:\n"
        "        k, v = (t.repeat(1, q.shape[1] // t.shape[1], 1, 1) for t in (k, v))\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,\n"
        "                                          scale=scale)\n"))
    only = [a for d in ("gqa_head_mapping", "matches_loop_oracle") for a in ("--attnzoo-only", d)]
    result = run(pytester, "--attnzoo-target", "nogqa:sdpa", *only)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "what its failing cases share:" in out
    summary = out.split("attnzoo diagnosis: nogqa:sdpa", 1)[1]
    assert "grouped-query attention" in summary and "root cause" in summary
