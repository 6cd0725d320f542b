"""The public pytest plugin (``pytest11`` entry point ``attnzoo``) in a temporary project.

Installed, it must change nothing until ``--attnzoo-target`` is given; given, it collects one item
per detector with the target in its id, carries attnzoo check's evidence into failures, works
with JUnit XML and pytest-xdist, and honours an expectations file strictly.
"""

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
    assert "impl = load('buggy.py')" in out
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
