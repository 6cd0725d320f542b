"""``attnzoo`` end to end, as a user runs it.

Exit codes are the contract: 0 nothing flagged, 1 a detector flagged, 2 bad input or usage (one
line on stderr, ``attnzoo: error: <what is wrong>: <what to do>``), 3 a detector itself failed.
Hostile implementations (hangs, exits, segfaults, garbage, noise) must become verdicts, never a
crashed or hung run.

Most tests call ``attnzoo.cli.main(argv)`` in this process (the code under test still runs in
its own worker process, as always): starting Python and torch for every command made the test
run several times slower than the kill matrix it exists to show. The real console script
(``console``, a subprocess with a timeout) is kept where isolation is the point: hostile
targets, the exit code of each kind of outcome, ``python -m attnzoo``, a scaffolded zoo in
another folder, and the exhaustive sweep.

Several tests here began as strict xfails documenting CLI bugs and now guard their fixes.

The exhaustive zoo sweep (``test_every_zoo_file_exit_code``: one ``attnzoo check`` per zoo
file, bugs restricted with ``--only`` to the detectors their metadata lists in ``caught_by``)
costs about 2 s a file, nearly all of it importing torch and the zoo in the worker: the default
run checks one file of each kind, and ``pytest -m slow`` checks every file.
"""

import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

import zoo
from attnzoo.cli import main
from detectors import all_detectors, baseline_suites, by_name

REPO = Path(__file__).resolve().parents[1]
TARGETS = "tests/targets"
PYTHON = sys.executable
ATTNZOO = str(Path(PYTHON).with_name("attnzoo")) if Path(PYTHON).with_name("attnzoo").exists() \
    else shutil.which("attnzoo")
TIMEOUT = 180  # seconds: a generous ceiling for any one command; most take 1 to 8 s

VERDICTS = {"killed", "nan", "crashed", "hung", "survived", "n/a", "unsupported", "error"}
FLAGGED = {"killed", "nan", "crashed", "hung"}
TARGET_KEYS = {"name", "locator", "contract", "backend", "mask_convention", "causal_alignment",
               "empty_rows", "device", "dtype", "seed", "unsupported", "refuses", "layout",
               "gqa_grouping", "float64_inputs"}
SUMMARY_KEYS = {"detectors", "passed", "flagged", "killed", "nan", "crashed", "hung",
                "not_applicable", "unsupported", "cases_unsupported", "errors", "not_run",
                "unreached",
                "conformant", "seconds", "impl_seconds", "calls"}
FINDING_KEYS = {"detector", "target", "verdict", "message", "evidence", "calls", "seconds",
                "impl_seconds", "notes", "unsupported", "cases"}
DIAGNOSIS_KEYS = {"feature", "features", "explains", "sentence", "detectors", "cases", "failing",
                  "refined", "passing_without", "variants", "smallest"}
EVIDENCE_KEYS = {"call", "case", "index", "expected", "actual", "snippet", "shrunk"}
SHRUNK_KEYS = {"case", "from", "to", "sizes", "attempts", "cap", "message", "call", "snippet",
               "skipped"}


@dataclass(frozen=True)
class Done:
    """What a command left: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def attnzoo(*args):
    """``attnzoo ARGS`` in this process, from the repository root."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(REPO)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(here)
    return Done(code, out.getvalue(), err.getvalue())


def console(*args, timeout=TIMEOUT, cwd=REPO, env=None, module=False):
    """Run the console script (or ``python -m attnzoo``) and return the finished process."""
    assert ATTNZOO, "the attnzoo console script is not installed next to this python"
    cmd = [PYTHON, "-m", "attnzoo", *args] if module else [ATTNZOO, *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          encoding="utf-8", timeout=timeout, check=False)


@functools.cache
def cached(*args, isolated=False):
    """Commands several tests read; run once per test process."""
    return console(*args) if isolated else attnzoo(*args)


PROGRESS = re.compile(r"attnzoo: (\[\d+/\d+\] [^:]+|loading the target): ")


def said(stderr):
    """stderr without the progress lines a check writes when stderr is not a terminal."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not PROGRESS.match(line))


def check_json(*args, isolated=False):
    p = cached("check", *args, "--json", isolated=isolated)
    assert p.returncode in (0, 1, 3), p.stderr
    assert said(p.stderr) == "", p.stderr
    return p, json.loads(p.stdout)


def only(*names):
    return [a for n in names for a in ("--only", n)]


def findings(doc):
    return [f for impl in doc["implementations"] for f in impl["findings"]]


def one_error_line(p):
    """The usage-error contract: exit 2, nothing on stdout, one 'attnzoo: error:' line."""
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert p.stdout == ""
    lines = said(p.stderr).splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("attnzoo: error: "), lines[0]
    assert "Traceback" not in p.stderr
    return lines[0]


# -- first, the slowest test: a hanging implementation (mostly waiting) ------------------


def test_hanging_implementation_becomes_hang_verdicts():
    detectors = ("known_answers", "matches_loop_oracle", "causality", "determinism")
    p = console("check", f"{TARGETS}/hangs.py", "--timeout", "1", "--json", *only(*detectors),
                timeout=90)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    hung = [f for f in findings(doc) if f["verdict"] == "hung"]
    assert len(hung) >= 3, [f["verdict"] for f in findings(doc)]
    assert all("no answer within 1 s" in f["message"] for f in hung)
    assert all(f["evidence"]["actual"] == "no answer within 1 s" for f in hung)
    assert doc["summary"]["hung"] == len(hung)
    assert {f["verdict"] for f in findings(doc)} <= {"hung", "n/a", "survived"}


# -- bad input: exit 2, one line naming the problem and the fix ------------------------------

BAD_TARGETS = [
    pytest.param(f"{TARGETS}/missing.py", ["no such file", "missing.py", "check the path"],
                 id="missing-file"),
    pytest.param(TARGETS, ["tests/targets", "not a .py file", "point at a Python module"],
                 id="directory"),
    pytest.param(f"{TARGETS}/syntax_error.py",
                 ["syntax_error.py:1", "syntax error", "fix the module"], id="syntax-error"),
    pytest.param(f"{TARGETS}/import_error.py",
                 ["import_error.py", "numpy_that_does_not_exist", "fix the module"],
                 id="import-error"),
    pytest.param(f"{TARGETS}/raises_bare_on_import.py",
                 ["raises_bare_on_import.py failed to import: RuntimeError: fix the module"],
                 id="bare-exception-on-import"),
    pytest.param(f"{TARGETS}/exits_on_import.py",
                 ["exits_on_import.py", "exited with code 4", "fix the module"],
                 id="exits-on-import"),
    pytest.param(f"{TARGETS}/no_contract.py",
                 ["no_contract.py", "defines none of", "attention",
                  "implement the lesson contract"], id="no-contract"),
    pytest.param(f"{TARGETS}/wrong_signature.py:not_callable",
                 ["wrong_signature.py:not_callable", "int", "neither a module nor callable",
                  "name a function"], id="not-callable"),
    pytest.param("torch.nn.functional:nope",
                 ["torch.nn.functional", "'nope'", "name a function"], id="missing-attribute"),
    pytest.param(f"{TARGETS}/wrong_signature.py:nope",
                 ["wrong_signature.py", "'nope'", "name a function"],
                 id="missing-attribute-in-file"),
    pytest.param(f"{TARGETS}/wrong_signature.py",
                 ["attention(Q, K)", "attention(Q, K, V, mask=None)", "fix its parameters"],
                 id="wrong-lesson-signature"),
    pytest.param(f"{TARGETS}/wrong_signature.py:sdpa",
                 ["sdpa(query)", "f(query, key, value", "fix its parameters"],
                 id="wrong-sdpa-signature"),
    pytest.param("file.py:", ["bad target 'file.py:'", "file.py:func"], id="no-function"),
    pytest.param(":func", ["bad target ':func'", "file.py:func"], id="no-module"),
    pytest.param("", ["empty target", "path/to/module.py"], id="empty"),
    pytest.param("   ", ["empty target", "path/to/module.py"], id="blank"),
    pytest.param("pkg.does_not_exist:f",
                 ["cannot import pkg.does_not_exist", "No module named 'pkg'",
                  "check the name or install it"], id="unknown-package"),
]


@pytest.mark.parametrize("target, words", BAD_TARGETS)
def test_bad_target_is_one_usage_error(target, words):
    line = one_error_line(attnzoo("check", target))
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"


@pytest.mark.parametrize("argv, words", [
    pytest.param(["check", "reference/lesson_numpy.py", "--only", "no_such_detector"],
                 ["'no_such_detector'", "attnzoo detectors"], id="unknown-only"),
    pytest.param(["check", "reference/lesson_numpy.py", "--timeout", "0"],
                 ["--timeout must be a positive number of seconds"], id="timeout-zero"),
    pytest.param(["check", "reference/lesson_numpy.py", "--timeout", "nan"],
                 ["--timeout must be a positive number of seconds"], id="timeout-nan"),
    pytest.param(["check", "reference/lesson_numpy.py", "--timeout", "inf"],
                 ["--timeout must be a positive number of seconds"], id="timeout-inf"),
    pytest.param(["check", "reference/lesson_numpy.py", "--seed", "-1"],
                 ["--seed must be 0 or more"], id="seed-negative"),
    pytest.param(["check", "reference/lesson_torch.py", "--backend", "torch", "--device",
                  "nonsense"], ["'nonsense'", "--device", "cpu"], id="device-unknown"),
    pytest.param(["check", "torch.nn.functional:scaled_dot_product_attention",
                  "--backend", "numpy"],
                 ["is a callable", "drop --backend numpy"], id="backend-numpy-on-callable"),
    pytest.param(["show", "no-such-entry"], ["no zoo entry 'no-such-entry'", "attnzoo list"],
                 id="show-unknown"),
    pytest.param(["matrix", "--only", "no-such-entry"],
                 ["no zoo entry 'no-such-entry'", "attnzoo list"], id="matrix-unknown"),
    pytest.param(["matrix", "--repeat", "0"], ["--repeat must be at least 1"],
                 id="matrix-repeat-zero"),
    pytest.param(["matrix", "--only", "no-scaling", "--output", "no/such/folder/m.json"],
                 ["cannot write no/such/folder/m.json", "folder does not exist"],
                 id="matrix-output-missing-folder"),
    pytest.param(["bench", "--against", "no-such-commit"],
                 ["--against no-such-commit", "no such commit", "'git log'"],
                 id="bench-against-unknown-commit"),
    pytest.param(["bench", "--against", "HEAD", "--checks"], ["separate runs", "give one"],
                 id="bench-against-and-checks"),
    pytest.param(["bench", "--flagged", "--ratio"], ["separate runs", "give one"],
                 id="bench-flagged-and-ratio"),
    pytest.param(["bench", "--checks", "--depth", "quick"], ["--depth", "--flagged"],
                 id="bench-depth-without-flagged"),
    pytest.param(["bench", "--check", "reference/lesson_numpy.py"], ["--check", "--against"],
                 id="bench-check-without-against"),
])
def test_bad_argument_is_one_usage_error(argv, words):
    line = one_error_line(attnzoo(*argv))
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"


@pytest.mark.parametrize("argv, words", [
    (["check", "reference/lesson_numpy.py", "--mask-convention", "maybe"],
     ["--mask-convention", "'maybe'", "'keep'", "'drop'", "attnzoo check --help"]),
    (["check", "reference/lesson_numpy.py", "--dtype", "float8"], ["--dtype", "'float8'"]),
    (["check", "reference/lesson_numpy.py", "--seed", "one"], ["--seed", "'one'"]),
    (["check"], ["target"]),
    (["frobnicate"], ["'frobnicate'"]),
    ([], ["no command given", "attnzoo --help"]),
], ids=["mask-convention-maybe", "dtype-float8", "seed-not-int", "no-target", "unknown-command",
        "no-command"])
def test_bad_usage_is_one_error_line(argv, words):
    """argparse's complaints follow the same one-line contract (they once printed a usage block
    and 'attnzoo check: error: ...'; a bare 'attnzoo' printed help on stdout)."""
    line = one_error_line(attnzoo(*argv))
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"


def test_torch_module_backend_is_inferred():
    """Without --backend a torch lesson module is checked as torch (it was once fed NumPy
    arrays and blamed: exit 1, 'returned a Tensor, not a numpy.ndarray')."""
    p, doc = check_json("reference/lesson_torch.py", *only("known_answers"))
    assert doc["implementations"][0]["target"]["backend"] == "torch"
    assert p.returncode == 0, p.stdout


def test_implementation_failing_in_the_backend_probe_gets_verdicts():
    p = console("check", f"{TARGETS}/mask_exits.py", "--backend", "numpy",
                *only("known_answers"))
    assert p.returncode == 1, p.stderr
    assert "exited with code 9" in p.stdout


# -- hostile implementations become verdicts -------------------------------------------------


def test_exiting_implementation_becomes_crash_verdicts():
    p, doc = check_json(f"{TARGETS}/exits.py", isolated=True)
    assert p.returncode == 1
    crashed = [f for f in findings(doc) if f["verdict"] == "crashed"]
    messages = [f["message"] for f in crashed]
    assert any("sys.exit" in m for m in messages), messages  # attention: sys.exit(3)
    assert any("exited with code 7" in m for m in messages), messages  # os._exit(7)
    softmax_only = "softmax_of_empty_row_is_zero"  # calls the reference's softmax alone
    assert {f["verdict"] for f in findings(doc) if f["detector"] != softmax_only} \
        <= {"crashed", "n/a"}
    assert [f["verdict"] for f in findings(doc) if f["detector"] == softmax_only] == ["survived"]


def test_segfaulting_implementation_becomes_crash_verdicts():
    p = console("check", f"{TARGETS}/segfaults.py:sdpa", "--json",
                *only("known_answers", "causality"))
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    for f in findings(doc):
        assert f["verdict"] == "crashed", f
        assert "SIGSEGV" in f["message"], f["message"]


def test_garbage_answers_become_crash_verdicts():
    p, doc = check_json(f"{TARGETS}/garbage.py", isolated=True)
    assert p.returncode == 1
    messages = [f["message"] for f in findings(doc) if f["verdict"] == "crashed"]
    assert any("not a pair" in m for m in messages), messages
    assert any("not a numpy.ndarray" in m for m in messages), messages


@pytest.mark.parametrize("target, detectors, words", [
    (f"{TARGETS}/wrong_dtype.py", ("matches_loop_oracle", "weights_are_distributions"),
     "not numbers"),
    (f"{TARGETS}/wrong_shape.py:sdpa", ("causality",), "shape"),
], ids=["text-arrays", "sdpa-wrong-shape"])
def test_wrong_answers_are_verdicts_not_detector_errors(target, detectors, words):
    """Answers of a non-numeric dtype, or an SDPA answer of the wrong size, are the
    implementation's fault (they once made the detectors raise: 'error' verdicts, exit 3)."""
    p, doc = check_json(target, *only(*detectors))
    assert {f["verdict"] for f in findings(doc)} <= {"crashed", "killed"}
    assert all(words in f["message"] for f in findings(doc)), [f["message"] for f in findings(doc)]
    assert p.returncode == 1


def test_array_subclass_answers_are_not_detector_errors():
    p, doc = check_json(f"{TARGETS}/array_subclass.py", *only("known_answers"))
    assert doc["summary"]["errors"] == 0, [f["message"] for f in findings(doc)]
    assert p.returncode in (0, 1)


NOISE = re.compile(r"\b(causal_mask \d|softmax \(|attention \(|causal_self_attention \()")


def test_noisy_implementation_does_not_pollute_the_report():
    p = console("check", f"{TARGETS}/noisy.py")
    assert p.returncode == 0, p.stdout
    assert said(p.stderr) == ""
    isolation, *lines = p.stdout.splitlines()
    assert isolation.startswith("isolation: ")  # test_isolation.py: what it says
    assert lines[0].startswith(f"{TARGETS}/noisy.py: lesson contract")
    assert lines[-1].startswith("summary: ") and lines[-1].endswith("— conformant")
    noisy = [line for line in lines if NOISE.search(line)]
    assert noisy, "the report should note that the implementation printed"
    for line in noisy:
        assert line.lstrip().startswith("note: the implementation printed output"), line


def test_noisy_implementation_json_is_valid():
    p, doc = check_json(f"{TARGETS}/noisy.py", *only("known_answers", "causality"),
                        isolated=True)
    assert p.returncode == 0
    assert doc["summary"]["conformant"] is True
    notes = [n for f in findings(doc) for n in f["notes"]]
    assert notes and all(n.startswith("the implementation printed output") for n in notes)


# -- exit codes ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["reference/lesson_numpy.py"],
    ["reference/lesson_torch.py", "--backend", "torch"],
    ["reference/sdpa.py:scaled_dot_product_attention"],
    ["torch.nn.functional:scaled_dot_product_attention"],
], ids=["lesson-numpy", "lesson-torch", "reference-sdpa", "torch-sdpa"])
def test_correct_implementations_exit_0(argv):
    p = attnzoo("check", *argv)
    assert p.returncode == 0, p.stdout
    assert said(p.stderr) == ""
    contract = "sdpa contract, torch" if ":" in argv[0] else \
        f"lesson contract, {argv[-1] if '--backend' in argv else 'numpy'}"
    assert p.stdout.splitlines()[1].startswith(f"{argv[0]}: {contract} backend, ")
    assert p.stdout.splitlines()[-1].endswith("— conformant")
    assert "FLAGGED" not in p.stdout and "CRASH" not in p.stdout


def test_callable_object_with_lesson_methods_is_checked_as_sdpa():
    """An SDPA-style object that subclasses a lesson class is a callable, not a lesson module.

    (Regression: such objects, reference/sdpa.py:scaled_dot_product_attention included, were
    once run as lesson/numpy targets, crashed, and exited 1.)
    """
    p, doc = check_json("zoo/decoys/flash_tiled.py:SDPA",
                        *only("known_answers", "matches_loop_oracle"))
    t = doc["implementations"][0]["target"]
    assert (t["contract"], t["backend"]) == ("sdpa", "torch")
    assert p.returncode == 0, p.stdout


def test_zoo_bug_exits_1_and_says_why():
    p = console("check", "zoo/mask_fill_zero.py", *only("known_answers", "causal_alignment"))
    assert p.returncode == 1
    assert said(p.stderr) == ""
    assert "mask-fill-zero/numpy: lesson contract, numpy backend" in p.stdout
    assert "mask-fill-zero/torch: lesson contract, torch backend" in p.stdout
    assert "FLAGGED known_answers" in p.stdout
    assert "reproduce:" in p.stdout
    assert p.stdout.splitlines()[-1].endswith("— NOT conformant")


FULL_SUITE_DECOYS = {"builtin-sdpa"}  # other decoys: a few detectors (the kill matrix runs all)
DECOY_DETECTORS = ("matches_loop_oracle", "weights_are_distributions", "causality",
                   "mask_forms_agree")
# One file of each kind runs by default; `pytest -m slow` runs every zoo file (about a minute).
SAMPLE = {"mask-fill-zero", "gqa-repeat-instead-of-interleave", "softmax-without-max",
          "query-scaled-in-place", "log-sum-exp", "flash-tiled"}
ZOO_FILES = [pytest.param(e, id=e.id, marks=() if e.id in SAMPLE else pytest.mark.slow)
             for e in zoo.BUGS + zoo.DECOYS]


@pytest.mark.parametrize("entry", ZOO_FILES)
def test_every_zoo_file_exit_code(entry):
    """Every bug file exits 1 on the detectors its metadata lists; every decoy file exits 0.

    The default sample runs in this process; ``-m slow`` runs the rest through the console
    script."""
    path = str(entry.path.relative_to(REPO)) if entry.path.is_relative_to(REPO) \
        else str(entry.path)
    if entry.is_bug:
        args = only(*entry.meta.caught_by)
    elif entry.id in FULL_SUITE_DECOYS:
        args = []
    else:
        args = only(*DECOY_DETECTORS)
    p = (attnzoo if entry.id in SAMPLE else console)("check", path, "--json", *args)
    assert said(p.stderr) == "", p.stderr
    doc = json.loads(p.stdout)
    rows = {impl["target"]["name"]: impl["summary"] for impl in doc["implementations"]}
    assert set(rows) == {f"{entry.id}/{b}" for b in entry.backends}
    if entry.is_bug:
        assert p.returncode == 1, rows
        missed = [name for name, s in rows.items() if not s["flagged"]]
        assert not missed, f"{missed} survived {entry.meta.caught_by}"
    else:
        flagged = [f["message"] for f in findings(doc) if f["verdict"] in FLAGGED | {"error"}]
        assert p.returncode == 0, flagged


# -- declared conventions ----------------------------------------------------------------------


def test_causal_bottom_right_passes_when_declared():
    checks = only("causal_alignment", "matches_loop_oracle")
    default = attnzoo("check", "zoo/causal_bottom_right.py", *checks)
    assert default.returncode == 1
    assert "causal alignment top-left" in default.stdout.splitlines()[1]
    declared, doc = check_json("zoo/causal_bottom_right.py", "--causal-alignment",
                               "bottom-right", "--seed", "3", *checks)
    assert declared.returncode == doc["exit_code"] == 0, declared.stdout
    target = doc["implementations"][0]["target"]
    assert (target["name"], target["contract"], target["backend"], target["mask_convention"],
            target["causal_alignment"], target["dtype"], target["seed"]) == \
        ("causal-bottom-right/sdpa", "sdpa", "torch", "keep", "bottom-right", "float64", 3)


def test_causal_bottom_right_declared_passes_correct_gradients():
    """correct_gradients follows the declared alignment (it once compared against top-left
    gradients and flagged a correct bottom-right implementation)."""
    p = attnzoo("check", "zoo/causal_bottom_right.py", "--causal-alignment", "bottom-right",
                *only("correct_gradients"))
    assert p.returncode == 0, p.stdout


MASK_DROP = ("zoo/mask_convention_inverted.py", "--mask-convention", "drop",
             *only("causal_alignment", "matches_loop_oracle"))


def test_mask_convention_drop_passes_the_sdpa_implementation():
    """What really happens with ``--mask-convention drop`` on mask-convention-inverted.

    Its SDPA implementation reads True as 'masked' and passes. Its lesson implementations stay
    flagged: their ``attention`` reads drop-masks, but ``causal_mask`` (the reference's) still
    returns a keep-mask, wrong under the declared convention, so the file exits 1. (By default
    all three are flagged: test_every_zoo_file_exit_code.)
    """
    p, doc = check_json(*MASK_DROP)
    assert p.returncode == 1
    rows = {impl["target"]["name"]: impl for impl in doc["implementations"]}
    sdpa = rows["mask-convention-inverted/sdpa"]
    assert (sdpa["target"]["contract"], sdpa["target"]["mask_convention"]) == ("sdpa", "drop")
    assert sdpa["summary"]["conformant"] is True
    for backend in ("numpy", "torch"):
        impl = rows[f"mask-convention-inverted/{backend}"]
        assert impl["target"]["mask_convention"] == "drop"
        flagged = [f for f in impl["findings"] if f["verdict"] == "killed"]
        assert [f["detector"] for f in flagged] == ["matches_loop_oracle"]
        assert "causal_mask" in flagged[0]["evidence"]["call"]
    text = cached("check", *MASK_DROP)
    assert text.returncode == 1
    assert "mask-convention-inverted/sdpa: sdpa contract, torch backend, mask convention drop, " \
        "causal alignment top-left, float64 on cpu, seed 0" in text.stdout.splitlines()


@pytest.mark.parametrize("convention, code", [("keep", 1), ("drop", 0)])
def test_mask_convention_reaches_lesson_attention(convention, code):
    """Detectors that call only ``attention`` with masks: the inverted reading is a bug under
    keep and correct under drop, for the lesson implementations as for SDPA (drop once
    reached SDPA calls only, while the lesson rows' header claimed it)."""
    p, doc = check_json("zoo/mask_convention_inverted.py", "--mask-convention", convention,
                        *only("weights_are_distributions", "mask_poisoning"))
    assert p.returncode == code, [f["message"] for f in findings(doc)]
    assert len(doc["implementations"]) == 3


# -- JSON ------------------------------------------------------------------------------------

JSON_BUG = ("zoo/no_scaling.py", *only("known_answers", "causal_alignment",
                                        "matches_loop_oracle"))


def test_json_document_shape():
    p, doc = check_json(*JSON_BUG)
    assert doc["schema"] == "attnzoo.check/4"
    assert doc["command"] == "check"
    assert doc["target"] == "zoo/no_scaling.py"
    assert doc["exit_code"] == p.returncode == 1
    assert isinstance(doc["seconds"], (int, float)) and doc["seconds"] >= 0
    assert set(doc["summary"]) == SUMMARY_KEYS
    names = [impl["target"]["name"] for impl in doc["implementations"]]
    assert names == ["no-scaling/numpy", "no-scaling/torch", "no-scaling/sdpa"]
    total = dict.fromkeys(["detectors", "passed", "flagged", "not_applicable", "errors"], 0)
    for impl in doc["implementations"]:
        t = impl["target"]
        assert set(t) == TARGET_KEYS
        backend = t["name"].split("/")[1]
        assert t["locator"] == f"zoo/no_scaling.py:{backend.upper()}"
        assert t["contract"] == ("sdpa" if backend == "sdpa" else "lesson")
        assert t["backend"] == ("numpy" if backend == "numpy" else "torch")
        assert (t["mask_convention"], t["causal_alignment"], t["device"], t["dtype"],
                t["seed"]) == ("keep", "top-left", "cpu", "float64", 0)
        assert set(impl["summary"]) == SUMMARY_KEYS
        assert [f["detector"] for f in impl["findings"]] == \
            ["known_answers", "causal_alignment", "matches_loop_oracle"]
        s = impl["summary"]
        verdicts = [f["verdict"] for f in impl["findings"]]
        assert s["detectors"] == len(verdicts)
        assert s["passed"] == verdicts.count("survived")
        assert s["flagged"] == sum(v in FLAGGED for v in verdicts) == \
            s["killed"] + s["nan"] + s["crashed"] + s["hung"]
        assert s["not_applicable"] == verdicts.count("n/a")
        assert s["conformant"] is (s["flagged"] == 0 and s["errors"] == 0 and s["passed"] > 0)
        assert s["calls"] == sum(f["calls"] for f in impl["findings"])
        for key in total:
            total[key] += s[key]
        for f in impl["findings"]:
            assert set(f) == FINDING_KEYS
            assert f["verdict"] in VERDICTS
            assert f["target"] == t["name"]
            assert f["message"].startswith(f"[{f['detector']}] ")
            assert isinstance(f["notes"], list)
            if f["verdict"] in FLAGGED:
                ev = f["evidence"]
                assert set(ev) == EVIDENCE_KEYS
                assert ev["call"] and ev["expected"] and ev["actual"] and ev["snippet"]
                assert ev["index"] is None or all(isinstance(i, int) for i in ev["index"])
                assert f"expected {ev['expected']}, got {ev['actual']}" in f["message"]
            else:
                assert f["evidence"] is None
        flagged = {f["detector"] for f in impl["findings"] if f["verdict"] in FLAGGED}
        assert {d for g in impl["diagnosis"] for d in g["detectors"]} == flagged
        assert all(set(g) == DIAGNOSIS_KEYS for g in impl["diagnosis"])
    for key, value in total.items():
        assert doc["summary"][key] == value
    assert {"killed", "n/a"} <= {f["verdict"] for f in findings(doc)}


def test_json_of_a_conformant_target():
    p, doc = check_json("reference/lesson_numpy.py", *only("known_answers", "causal_alignment"))
    assert doc["exit_code"] == p.returncode == 0
    assert doc["summary"]["conformant"] is True
    impl, = doc["implementations"]
    assert impl["target"]["name"] == impl["target"]["locator"] == "reference/lesson_numpy.py"
    assert [f["verdict"] for f in impl["findings"]] == ["survived", "n/a"]


def test_json_exit_code_3_when_a_detector_errs():
    """A detector failure is exit 3 and an 'error' verdict, never a flag on the target.

    No detector of the suite errs on purpose, so a detector of our own that always raises is
    loaded from tests/targets/detectors through ATTNZOO_DETECTORS.
    """
    env = dict(os.environ, ATTNZOO_DETECTORS=str(REPO / TARGETS / "detectors"))
    p = console("check", "reference/lesson_numpy.py", "--json", *only("detector_that_errs"),
                env=env)
    doc = json.loads(p.stdout)
    assert p.returncode == doc["exit_code"] == 3
    assert doc["summary"]["errors"] == 1 and doc["summary"]["flagged"] == 0
    assert doc["summary"]["conformant"] is False
    f, = findings(doc)
    assert f["verdict"] == "error" and f["evidence"] is None
    assert f["message"].startswith("[detector_that_errs] detector error ZeroDivisionError")


def test_flagged_snippets_reproduce_the_call():
    _, doc = check_json(*JSON_BUG)
    seen = set()
    for impl in doc["implementations"]:
        if impl["target"]["name"] == "no-scaling/torch":
            continue  # same snippet code path as numpy, plus "import torch": one less subprocess
        f = next(f for f in impl["findings"] if f["verdict"] == "killed")
        snippet = f["evidence"]["snippet"]
        path = str(REPO / impl["target"]["locator"].split(":")[0])
        assert f"spec_from_file_location('no_scaling', {path!r})" in snippet
        assert "attnzoo" not in snippet, snippet  # runs wherever the target imports
        r = subprocess.run([PYTHON, "-c", snippet], cwd=REPO.parent, capture_output=True,
                           text=True, timeout=120, check=False)
        assert r.returncode == 0, f"{impl['target']['name']}: {r.stderr[-2000:]}"
        seen.add(impl["target"]["contract"])
    assert seen == {"lesson", "sdpa"}


def test_docs_name_every_json_field():
    _, doc = check_json(*JSON_BUG)
    text = (REPO / "docs" / "check-json.md").read_text(encoding="utf-8")
    keys = set(doc) | SUMMARY_KEYS | TARGET_KEYS | FINDING_KEYS | EVIDENCE_KEYS | SHRUNK_KEYS \
        | DIAGNOSIS_KEYS
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing, f"docs/check-json.md does not document {missing}"
    assert all(f"`{v}`" in text for v in VERDICTS)


# -- list, show, matrix, detectors -------------------------------------------------------------


def test_list_names_every_entry():
    p = cached("list")
    assert p.returncode == 0 and p.stderr == ""
    ids = {line.split()[0] for line in p.stdout.splitlines()[1:-1]}
    assert ids == {e.id for e in zoo.BUGS + zoo.DECOYS}
    assert p.stdout.splitlines()[-1] == f"{len(zoo.BUGS)} bugs, {len(zoo.DECOYS)} decoys"


def test_list_json():
    p = attnzoo("list", "--json")
    assert p.returncode == 0
    rows = json.loads(p.stdout)
    assert {r["id"] for r in rows if r["kind"] == "bug"} == {e.id for e in zoo.BUGS}
    assert {r["id"] for r in rows if r["kind"] == "decoy"} == {e.id for e in zoo.DECOYS}
    for r in rows:
        assert set(r) == {"id", "kind", "category", "symptom", "backends", "title", "depth"}
        assert set(r["backends"]) <= {"numpy", "torch", "sdpa"}
        assert r["depth"] in (("quick", "standard", "deep") if r["kind"] == "bug" else ("-",))


def test_the_depth_an_entry_shows_at_agrees_everywhere():
    """list, show, the committed matrix's summary and the catalogue say one thing: at which
    tier each entry shows, and that rows of deeper entries are not counted as missed."""
    rows = json.loads(attnzoo("list", "--json").stdout)
    deeper = {r["id"]: r for r in rows if r["kind"] == "bug" and r["depth"] != "quick"}
    assert deeper, "the zoo has entries that show only past quick"
    matrix = json.loads((REPO / "docs" / "kill-matrix.json").read_text(encoding="utf-8"))
    s = matrix["summary"]
    assert s["depth"] == "quick" and s["missed_rows"] == []
    assert s["deeper_rows"] == sum(len(r["backends"]) for r in deeper.values())
    readme = (REPO / "docs" / "catalogue" / "README.md").read_text(encoding="utf-8")
    for entry_id, r in deeper.items():
        line = next(x for x in readme.splitlines() if x.startswith(f"- [`{entry_id}`]"))
        assert line.endswith(f"it shows at {r['depth']}, not quick"), line
    entry_id = min(i for i, r in deeper.items() if r["depth"] == "standard")
    shown = cached("show", entry_id).stdout
    assert re.search(r"^\w+ at standard: caught by [1-9]\d*/\d+ detectors", shown, re.MULTILINE), \
        shown


def test_python_m_attnzoo_is_attnzoo():
    p = console("list", module=True)
    assert (p.returncode, p.stdout, p.stderr) == (0, cached("list").stdout, "")


def test_console_script_exit_codes():
    """The installed script returns main's status: 0 for a conformant target, 2 (one line) for
    bad input. (1 and 3: test_zoo_bug_exits_1_and_says_why, test_json_exit_code_3_...)"""
    p = console("check", "reference/lesson_numpy.py", *only("known_answers"))
    assert (p.returncode, said(p.stderr)) == (0, ""), p.stdout
    assert p.stdout.splitlines()[-1].endswith("— conformant")
    line = one_error_line(console("check", f"{TARGETS}/missing.py"))
    assert "no such file" in line


def test_show_entry():
    p = cached("show", "mask-fill-zero")
    assert p.returncode == 0, p.stdout
    out = p.stdout
    assert out.startswith("mask-fill-zero: ")
    assert "lesson:    Fill masked scores with −∞" in out
    assert "--- reference/lesson_numpy.py LessonNumpy.attention" in out
    assert "+++ zoo/mask_fill_zero.py Numpy.attention" in out
    assert re.search(r"^\+.*# BUG", out, re.MULTILINE), "the diff shows the marked line"
    for backend in ("numpy", "torch"):
        assert re.search(rf"^{backend} at quick: caught by \d+/\d+ detectors: .*known_answers", out,
                         re.MULTILINE)


def test_show_file_path():
    """(It once printed zoo/zoo/mask_fill_zero.py.)"""
    p = cached("show", "mask-fill-zero")
    assert "file:      zoo/mask_fill_zero.py\n" in p.stdout


def test_show_says_which_row_it_evaluates_off_a_terminal():
    p = cached("show", "mask-fill-zero")
    assert re.findall(r"^attnzoo: \[(\d)/2\] (\S+): ", p.stderr, re.MULTILINE) == \
        [("1", "mask-fill-zero-numpy"), ("2", "mask-fill-zero-torch")], p.stderr


def test_matrix_json_only_one_entry():
    p = attnzoo("matrix", "--only", "mask-fill-zero", "--format", "json")
    assert p.returncode == 0, p.stdout[-2000:]
    m = json.loads(p.stdout)
    assert [r["row"] for r in m["rows"]] == ["mask-fill-zero-numpy", "mask-fill-zero-torch"]
    assert {r["id"] for r in m["rows"]} == {"mask-fill-zero"}  # no reference rows
    for r in m["rows"]:
        assert set(r["cells"]) == set(m["detectors"] + m["baselines"])
        assert {r["cells"][d]["cell"] for d in zoo.entry("mask-fill-zero").meta.caught_by} \
            == {"hit"}
    assert m["summary"]["failures"] == 0 and m["summary"]["bug_rows"] == 2


def test_matrix_seed_sweep_writes_its_result_and_says_each_seed(tmp_path):
    out = tmp_path / "seeds.json"
    p = attnzoo("matrix", "--seeds", "2", "--only", "mask-fill-zero", "--jobs", "1",
                "--format", "json", "--output", str(out))
    assert p.returncode == 0 and p.stdout == "", p.stderr
    assert [line.split(":")[0] for line in p.stderr.splitlines()] == ["seed 0", "seed 1"]
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert (doc["seeds"], doc["depth"], doc["seed_dependent"]) == (2, "quick", [])
    columns = len(all_detectors()) + len(baseline_suites())
    assert doc["cells"] == 2 * columns and [s["seed"] for s in doc["per_seed"]] == [0, 1]
    assert all(s["failing_cells"] == 0 for s in doc["per_seed"])


def test_a_seed_sweep_names_each_failing_cell_as_its_seed_finishes(monkeypatch, tmp_path):
    """A sweep stopped after a seed has already said which cells failed there, and the JSON
    keeps them per seed: a count alone cannot be looked into."""
    from argparse import Namespace

    from attnzoo.matrix import command, model

    class Failing:  # seed 1 has a false alarm whose message carries a control character
        def __init__(self, seed):
            self.found = [("reference-torch", "causality", "moved\x1b[2J")] if seed else []

        def failures(self):
            return self.found

    monkeypatch.setattr(model, "evaluate", lambda seed, *a, **k: Failing(seed))
    monkeypatch.setattr(model, "kinds", lambda m: {("reference-torch", "causality"):
                                                   "false" if m.found else "pass"})
    out = tmp_path / "seeds.json"
    args = Namespace(seeds=2, repeat=1, device="cpu", dtype="float64", depth="deep", jobs=1,
                     only=["reference"], format="json", output=str(out))
    err = io.StringIO()
    with redirect_stderr(err):
        assert command.seed_sweep(args, None) == 1
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("seed 0: 0 failing cells") and lines[1].startswith("seed 1: 1 ")
    assert lines[2] == "  reference-torch × causality: moved\\x1b[2J"
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert [s["failing"] for s in doc["per_seed"]] == [[], [{
        "row": "reference-torch", "detector": "causality", "message": "moved\\x1b[2J"}]]
    assert doc["seed_dependent"] == [{"row": "reference-torch", "detector": "causality",
                                      "kinds": ["pass", "false"]}]


def test_a_cell_whose_kind_changes_with_the_seed_is_listed():
    from attnzoo.matrix.model import seed_dependent

    runs = [{("a-numpy", "causality"): "hit", ("a-numpy", "determinism"): "pass"},
            {("a-numpy", "causality"): "miss", ("a-numpy", "determinism"): "pass"}]
    assert seed_dependent(runs) == [("a-numpy", "causality")]
    assert one_error_line(attnzoo("matrix", "--seeds", "1"))


def test_matrix_markdown():
    p = attnzoo("matrix", "--format", "markdown", "--only", "no-scaling")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert lines[0].startswith("| row | 1 | 2 |") and lines[1].startswith("|---|")
    assert [line.split("|")[1].strip() for line in lines[2:5]] == \
        ["no-scaling-numpy", "no-scaling-torch", "no-scaling-sdpa"]
    assert not lines[5].startswith("|")
    assert "- failing cells: 0" in lines


def test_detectors():
    p = attnzoo("detectors")
    assert p.returncode == 0 and p.stderr == ""
    listed = [line.split()[0] for line in p.stdout.splitlines() if not line.startswith(" ")]
    assert listed == list(by_name())


# -- attnzoo new ---------------------------------------------------------------------------------


@pytest.fixture
def zoo_copy(tmp_path):
    """A copy of the zoo package in tmp_path; ``reference`` and ``detectors`` stay the repo's.

    Commands run with cwd=tmp_path and PYTHONPATH=tmp_path: ``python -m`` puts the working
    directory first on sys.path, so from the repo root ``import zoo`` would find the repo's zoo.
    """
    shutil.copytree(REPO / "zoo", tmp_path / "zoo",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    return tmp_path, env


def test_new_scaffolds_an_entry_that_tests_reject_until_complete(zoo_copy):
    tmp, env = zoo_copy
    p = console("new", "softmax-over-batch", module=True, cwd=tmp, env=env)
    assert p.returncode == 0, p.stderr
    path = tmp / "zoo" / "softmax_over_batch.py"
    assert p.stdout.startswith(f"created {path}")
    assert not (REPO / "zoo" / "softmax_over_batch.py").exists()
    source = path.read_text(encoding="utf-8")
    assert 'id="softmax-over-batch"' in source
    for field in ("title", "category", "symptom", "lesson", "seen_in", "caught_by"):
        line = next(line for line in source.splitlines() if line.strip().startswith(field + "="))
        assert "TODO" in line, line

    m = console("matrix", "--only", "softmax-over-batch", module=True, cwd=tmp, env=env)
    assert m.returncode == 0, m.stdout[-2000:] + m.stderr[-2000:]
    assert re.search(r"^softmax-over-batch-numpy\s", m.stdout, re.MULTILINE), m.stdout

    t = subprocess.run([PYTHON, "-m", "pytest", str(REPO / "tests" / "test_zoo.py"), "-q",
                        "-k", "softmax-over-batch", "-p", "no:cacheprovider", "-p", "no:xdist"],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                       check=False)
    assert t.returncode == 1, t.stdout[-3000:]  # failed, not "no tests collected" (5)
    assert re.search(r"^FAILED \S*test_zoo\.py::test_entry_is_complete\[softmax-over-batch\]",
                     t.stdout, re.MULTILINE), t.stdout[-3000:]
    assert "TODO" in t.stdout


COMPLETED = {  # the scaffold's TODO lines, filled in as a newcomer would
    '"""TODO: the mistake in one line.': '"""Scores doubled before the softmax.',
    "TODO: the story — what the code means to do, what it does instead, how it shows and why\n"
    "nothing complains.": "The weights come out too peaked; nothing crashes.",
    'title="TODO: one line, named for the mistake"': 'title="Scores multiplied by two"',
    'symptom="TODO: one of crash, nan, silent"': 'symptom="silent"',
    'lesson="TODO: one imperative sentence."': 'lesson="Scale scores by 1/sqrt(d_k) once."',
    'seen_in="TODO: where people make this mistake"': 'seen_in="a tutorial"',
    "caught_by=(),  # TODO: the detectors that must catch it (run: attnzoo show scores-doubled)":
    'caught_by=("known_answers",),',
    '        # TODO: make the mistake in one line and mark it with a "# BUG: ..." comment\n': "",
    "/ math.sqrt(d_k)  # (..., T_q, T_k)": "/ math.sqrt(d_k) * 2  # BUG: doubled (..., T_q, T_k)",
}


def test_a_completed_entry_passes_and_the_run_ends_with_what_to_run_next(zoo_copy):
    """After ``attnzoo new`` and a completed entry, its rows pass, and the last line the test
    run prints is the next step: ``attnzoo docs`` writes the entry's catalogue page."""
    tmp, env = zoo_copy
    assert console("new", "scores-doubled", module=True, cwd=tmp, env=env).returncode == 0
    path = tmp / "zoo" / "scores_doubled.py"
    source = path.read_text(encoding="utf-8")
    for todo, done in COMPLETED.items():
        assert todo in source, todo
        source = source.replace(todo, done)
    source = re.sub(r'category="TODO: one of [^"]*"', 'category="scaling"', source)
    assert "TODO" not in source.split("NUMPY = Numpy()")[0], source
    path.write_text(source, encoding="utf-8")
    (tmp / "docs" / "catalogue").mkdir(parents=True)
    t = subprocess.run([PYTHON, "-m", "pytest", str(REPO / "tests" / "test_kill_matrix.py"),
                        str(REPO / "tests" / "test_zoo.py"), "-q", "-k", "scores-doubled",
                        "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "attnzoo.matrix.plugin",
                        "--rootdir", str(tmp)],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                       check=False)
    assert t.returncode == 0, t.stdout[-3000:]
    last = t.stdout.rstrip().splitlines()[-1]
    assert last == ("next: run 'attnzoo docs' to write the catalogue page of scores-doubled, "
                    "and commit docs/"), t.stdout[-3000:]


@pytest.mark.parametrize("entry_id, words", [
    ("Softmax_Over_Batch", ["'Softmax_Over_Batch'", "kebab-case"]),
    ("mask-fill-zero", ["'mask-fill-zero'", "exists already", "pick another id"]),
], ids=["bad-id", "existing-id"])
def test_new_rejects_bad_and_existing_ids(zoo_copy, entry_id, words):
    tmp, env = zoo_copy
    before = sorted(p.name for p in (tmp / "zoo").iterdir())
    line = one_error_line(console("new", entry_id, module=True, cwd=tmp, env=env))
    for word in words:
        assert word in line, line
    assert sorted(p.name for p in (tmp / "zoo").iterdir()) == before


def test_a_command_run_from_python_leaves_the_callers_signal_handlers():
    """attnzoo.cli.main ends a run on SIGTERM, SIGHUP or SIGINT; the caller's handlers
    (pytest's own KeyboardInterrupt, here) are back once it returns."""
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    assert attnzoo("check", "reference/lesson_numpy.py", "--depth", "quick",
                   *only("known_answers")).returncode == 0
    assert {s: signal.getsignal(s) for s in before} == before


def test_every_failure_expected_is_conformant_with_them_and_one_unexpected_is_not(tmp_path):
    """``--expect``: the summary says "conformant with N expected failures" (and the JSON
    counts them) only when every flagged detector is expected; one more flag is a failure."""
    only = ("--only", "empty_rows_are_zero", "--only", "matches_loop_oracle")
    args = ("check", "tests/targets/naive_sdpa.py:sdpa", "--depth", "quick", *only)
    both, one = tmp_path / "both.toml", tmp_path / "one.toml"
    both.write_text('[empty_rows_are_zero]\nreason = "NaN rows"\n\n'
                    '[matches_loop_oracle]\nreason = "NaN rows"\n', encoding="utf-8")
    one.write_text('[empty_rows_are_zero]\nreason = "NaN rows"\n', encoding="utf-8")
    done = attnzoo(*args, "--expect", str(both))
    assert done.returncode == 0 and "— conformant with 2 expected failures" in done.stdout
    document = json.loads(attnzoo(*args, "--expect", str(both), "--json").stdout)
    assert document["summary"]["expected_failures"] == 2 and document["summary"]["conformant"]
    done = attnzoo(*args, "--expect", str(one))
    assert done.returncode == 1 and "— NOT conformant" in done.stdout, done.stdout
