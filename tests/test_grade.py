"""``attnzoo grade``: a plain pytest suite against the zoo, and the lesson tests' generated page.

The grade of a known suite is computed a second way — its test functions called directly on each
implementation — and must equal what ``attnzoo grade --json`` says. Hostile suites (a test that
hangs, calls ``sys.exit`` or kills its process; a file that does not import; a test that fails
on the reference) must each become a verdict or a one-line error, never a crashed run.
"""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zoo
from attnzoo.devtools import grade_page
from attnzoo.grade import model, render
from attnzoo.grade.run import Suite

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "tests" / "targets" / "grade"
ATTNZOO = [sys.executable, "-m", "attnzoo"]
TIMEOUT = 600


def attnzoo(*args):
    return subprocess.run(ATTNZOO + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=TIMEOUT)


def direct_grade(path, rows):
    """{row label: {test: caught}} by calling the suite's functions on each implementation."""
    spec = importlib.util.spec_from_file_location("known_suite_direct", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = {n: f for n, f in vars(module).items() if n.startswith("test_") and callable(f)}
    out = {}
    for row in rows:
        entry = next((e for e in zoo.BUGS + zoo.DECOYS if e.id == row.id), None)
        if entry is None:
            from reference import lesson_numpy as impl
        else:
            obj = entry.implementation(row.backend)
            impl = type(obj)()
        out[row.label] = {}
        for name, fn in tests.items():
            try:
                fn(impl)
                out[row.label][name] = False
            except Exception:  # noqa: BLE001 - any failure or error is a catch
                out[row.label][name] = True
    return out


@pytest.fixture(scope="module")
def graded():
    done = attnzoo("grade", str(SUITES / "known_suite.py"), "--json", "--reveal")
    assert done.returncode in (0, 1), done.stderr
    return done


@pytest.fixture(scope="module")
def known(graded):
    return json.loads(graded.stdout)


def test_progress_is_a_line_per_implementation_off_a_terminal(graded, known):
    """A grade takes minutes: stderr, not a terminal here, says which row finished."""
    lines = [ln for ln in graded.stderr.splitlines() if ln.startswith("attnzoo: [")]
    counts = [re.match(r"attnzoo: \[(\d+)/(\d+)\] (\S+) graded: ", ln) for ln in lines]
    assert counts and all(counts), graded.stderr[-2000:]
    assert [int(m[1]) for m in counts] == list(range(1, len(counts) + 1))
    s = known["summary"]
    assert {int(m[2]) for m in counts} == {len(counts)} == {s["implementations"] + s["canaries"]}
    labels, rows = {m[3] for m in counts}, {r["row"] for r in known["rows"]}
    canaries = labels - rows
    assert rows <= labels and len(canaries) == s["canaries"] > 0
    assert all(c.startswith("canary-") and c.removeprefix("canary-") in rows for c in canaries)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the bugs' overflows, called directly
def test_known_suite_grade_equals_calling_its_tests_directly(known):
    rows = model.implementations(["lesson"], "numpy")
    want = direct_grade(SUITES / "known_suite.py", rows)
    have = {r["row"]: {t.split("::")[1]: c["cell"] in ("hit", "crash", "false")
                       for t, c in r["cells"].items()} for r in known["rows"]}
    assert have == want
    caught = {r.id for r in rows if r.kind == "bug" and any(want[r.label].values())}
    assert known["summary"]["caught"] == len(caught) > 0
    assert known["summary"]["bugs"] == len({r.id for r in rows if r.kind == "bug"})
    assert known["summary"]["false_alarms"] == 0 and known["exit_code"] == 0


def test_min_caught_decides_the_exit_code(known):
    caught = known["summary"]["caught"]
    assert model.exit_code(known, caught) == 0
    assert model.exit_code(known, caught + 1) == 1


def test_survivors_are_hidden_unless_revealed(known):
    hidden = model.hide(known)
    survivors = {b["id"] for b in known["bugs"] if not b["caught"]}
    assert survivors, "the known suite should leave some bugs alive"
    shown = render.text(hidden)
    assert not any(re.search(rf"\b{re.escape(s)}\b", shown) for s in survivors)
    assert "hint:" in shown and "--reveal" in shown
    assert all(re.search(rf"\b{re.escape(s)}\b", render.text(known)) for s in survivors)


def test_a_test_failing_on_the_reference_is_a_false_alarm_listed_first():
    pick = {"reference", "einsum", "mask-fill-zero"}
    doc = model.grade(Suite(SUITES / "false_alarm.py"), select=lambda r: r.id in pick)
    alarms = {(a["test"].split("::")[1], a["implementation"]) for a in doc["false_alarms"]}
    assert alarms == {("test_wrong_expectation", "reference-numpy"),
                      ("test_wrong_expectation", "einsum-numpy"),  # and the reference as a bug:
                      ("test_wrong_expectation", "canary-mask-fill-zero-numpy")}
    assert all("assert" in a["text"] for a in doc["false_alarms"])
    assert model.exit_code(doc) == 1
    text = render.text(doc)
    assert text.index("FALSE ALARMS") < text.index("tests × implementations")
    assert text.endswith("3 false alarms")
    assert "canary is the reference dressed as a bug" in text


def test_a_file_that_does_not_import_is_bad_input():
    done = attnzoo("grade", str(SUITES / "does_not_import.py"))
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "does_not_import.py does not collect" in line and "numpy_but_misspelled" in line


def test_missing_path_is_bad_input():
    done = attnzoo("grade", "no/such/tests.py")
    assert done.returncode == 2 and "no such file or folder" in done.stderr


def test_hangs_exits_and_dead_processes_are_verdicts_on_their_tests():
    doc = model.grade(Suite(SUITES / "hostile.py"), test_seconds=3,
                      select=lambda r: r.id == "reference")
    (row,) = doc["rows"]
    got = {t.split("::")[1]: (c["outcome"], c["exception"]) for t, c in row["cells"].items()}
    assert got == {
        "test_hangs": ("hung", ""),
        "test_calls_sys_exit": ("failed", "SystemExit"),
        "test_kills_its_process": ("died", ""),
        "test_fine_after_all_that": ("passed", ""),
    }
    died = next(c for t, c in row["cells"].items() if t.endswith("test_kills_its_process"))
    assert "exited with code 7" in died["text"]
    assert doc["summary"]["false_alarms"] == 3


def test_each_graded_run_is_forked_by_the_server_that_has_no_address(tmp_path, monkeypatch):
    """A graded run is a child of attnzoo's worker server, in a session of its own: the server
    speaks only over its socketpair, so a suite has no fork server to ask for an escape."""
    from attnzoo.sandbox import zygote

    suite = tmp_path / "test_where.py"
    suite.write_text("import json, os\n\n\ndef test_where(attention):\n"
                     "    with open(os.environ['ATTNZOO_TEST_OUT'], 'w') as f:\n"
                     "        json.dump([os.getpid(), os.getppid(), os.getsid(0)], f)\n")
    monkeypatch.setenv("ATTNZOO_TEST_OUT", str(tmp_path / "where.json"))
    doc = model.grade(Suite(suite), select=lambda r: r.id == "reference")
    assert doc["summary"]["false_alarms"] == 0
    pid, parent, session = json.loads((tmp_path / "where.json").read_text())
    assert parent == zygote.server_pid() and session == pid
    from multiprocessing import forkserver

    assert forkserver._forkserver._forkserver_pid is None  # noqa: SLF001 - none was started


def test_a_function_the_implementation_lacks_skips_the_test():
    from attnzoo.grade import proxy
    from attnzoo.grade.run import Relay

    worker = Relay({"locator": str(SUITES / "impl" / "only_softmax.py"), "contract": "lesson"},
                   None)
    worker.ready()
    try:
        lesson = proxy.Lesson(proxy.Connection(worker.sock, worker.functions, "numpy"))
        assert lesson.softmax(1) == 1
        with pytest.raises(pytest.skip.Exception, match="has no causal_mask"):
            lesson.causal_mask(3)
        assert repr(lesson) == "<attention under test>"
    finally:
        worker.close()


# -- the lesson's seven tests and their page -----------------------------------------------------


def test_lesson_page_follows_from_the_committed_grade():
    assert grade_page.stale() == [], "run `attnzoo docs --from-json docs/kill-matrix.json`"


def test_lesson_grade_agrees_with_the_lesson_checks_row():
    doc = grade_page.load(ROOT / grade_page.JSON_PATH)
    matrix = grade_page.load(ROOT / grade_page.MATRIX)
    assert grade_page.differences(doc, matrix) == []
    assert doc["summary"]["tests"] == 7 and doc["summary"]["false_alarms"] == 0


def test_attnzoo_grade_prints_the_grade_the_docs_show():
    done = attnzoo("grade", grade_page.TESTS.as_posix(), "--json", "--reveal")
    assert done.returncode == 0, done.stderr
    fresh = grade_page.compact(json.loads(done.stdout))
    committed = grade_page.load(ROOT / grade_page.JSON_PATH)
    drift = {k: (fresh.get(k), committed.get(k)) for k in set(fresh) | set(committed)
             if k != "rows" and fresh.get(k) != committed.get(k)}
    drift.update({r["row"]: {t: c for t, c in r["cells"].items() if c != old["cells"].get(t)}
                  for r, old in zip(fresh["rows"], committed["rows"]) if r != old})
    assert fresh == committed, f"the lesson tests' grade changed (run `attnzoo docs`): {drift}"
    page = (ROOT / grade_page.PAGE).read_text(encoding="utf-8")
    assert render.text(model.hide(fresh)) in page


def test_a_test_that_judges_by_the_source_or_the_arguments_catches_nothing():
    """A test that reads the ``# BUG`` line instead of calling the implementation finds none:
    it is handed a proxy (attnzoo/grade/proxy.py), whose source is attnzoo's; the arguments of
    the run name nothing either. Neither catches a bug or fails on a canary."""
    done = attnzoo("grade", str(SUITES / "judges_by_name.py"), "--json", "--reveal")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["summary"]["canaries"] > 0 and doc["summary"]["canaries_failed"] == 0
    for name in ("test_its_source_has_no_bug_line", "test_the_arguments_do_not_name_it"):
        (test,) = [t for t in doc["tests"] if t.endswith(name)]
        assert doc["tests"][test]["catches"] == [] and doc["tests"][test]["false_alarms"] == 0
