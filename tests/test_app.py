"""The application's rooms: the vocabulary, the catalogue order, the kill-matrix plugin's
comparison with the committed matrix, ``attnzoo gpu``'s exit code, and a regular install.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import zoo
from attnzoo import catalogue, gpu, vocabulary
from attnzoo.matrix import model, render
from attnzoo.matrix.plugin import COMMITTED, KillMatrixReport, compare
from detectors.kit.verdict import CAUGHT, VERDICTS

REPO = Path(__file__).resolve().parents[1]


# -- one vocabulary ---------------------------------------------------------------------------


def test_every_verdict_and_cell_kind_is_spelled_once():
    assert set(vocabulary.VERDICTS) == set(VERDICTS)
    assert vocabulary.CAUGHT == CAUGHT
    glyphs = [k.glyph for k in vocabulary.CELLS.values()]
    assert len(set(glyphs)) == len(glyphs), "two kinds of cell share a glyph"
    assert vocabulary.FAILURES == ("miss", "false", "error")
    assert vocabulary.CAUGHT_CELLS == ("hit", "bonus", "crash")


def test_the_matrix_text_and_json_use_the_vocabulary():
    m = model.evaluate(select=lambda r: r.id == "no-scaling")
    text = render.text(m)
    assert all(f"{k.glyph} {k.meaning}" in " ".join(text.split())
               for k in vocabulary.CELLS.values())
    assert max(len(line) for line in text.splitlines()) <= render.WIDTH
    assert "\x1b[" not in text and "\x1b[" in render.text(m, colour=True)
    symbols = m.to_json()["symbols"]
    assert {k: s["symbol"] for k, s in symbols.items()} == \
        {k.name: k.glyph for k in vocabulary.CELLS.values()}
    row = m.rows[0]
    line = next(line for line in text.splitlines() if line.startswith(row.label + " "))
    assert vocabulary.CELLS["hit"].glyph in line


# -- one catalogue order ------------------------------------------------------------------------


def test_list_show_and_matrix_share_one_order():
    bug_ids = [e.id for e in catalogue.bugs()]
    listed = [r["id"] for r in catalogue.listing()]
    assert listed == bug_ids + [e.id for e in zoo.DECOYS]
    rows = [r.id for r in model.rows() if r.kind == "bug"]
    assert list(dict.fromkeys(rows)) == bug_ids
    ranks = [catalogue.category_rank(e.meta.category) for e in catalogue.bugs()]
    assert ranks == sorted(ranks)


def test_rows_and_check_map_backends_the_same_way():
    for row in model.rows():
        target = row.target()
        assert (target.contract, target.backend) == catalogue.ROW_BACKENDS[row.backend]


# -- the plugin compares every cell with docs/kill-matrix.json -----------------------------------


def committed():
    return json.loads((REPO / COMMITTED).read_text(encoding="utf-8"))


def report_with(cells_doc, seed=0):
    options = {"kill_matrix_seed": seed, "kill_matrix_json": None, "kill_matrix_depth": "quick"}
    plugins = SimpleNamespace(get_plugin=lambda name: None)  # a run with no terminal reporter
    config = SimpleNamespace(rootpath=REPO, getoption=options.__getitem__, pluginmanager=plugins)
    report = KillMatrixReport(config)
    for r in cells_doc["rows"]:
        for d, c in r["cells"].items():
            finding = {k: v for k, v in c.items() if k != "cell"}
            report.cells[(r["row"], d)] = {"seconds": 0.0, "impl_seconds": 0.0, **finding}
    return report


def finish(report):
    session = SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    report.pytest_sessionfinish(session)
    return session.exitstatus


def test_a_whole_run_that_agrees_passes():
    report = report_with(committed())
    assert report.is_whole()
    assert finish(report) == pytest.ExitCode.OK
    assert report.drift == []


def test_a_whole_run_that_differs_fails_and_names_the_cell():
    doc = committed()
    row = next(r for r in doc["rows"] if r["row"] == "mask-fill-zero-numpy")
    row["cells"]["known_answers"]["verdict"] = "survived"
    report = report_with(doc)
    assert finish(report) == pytest.ExitCode.TESTS_FAILED
    assert report.drift == [("mask-fill-zero-numpy", "known_answers", "hit (killed)",
                             "miss (survived)")]


def test_a_subset_or_another_seed_is_compared_with_nothing():
    doc = committed()
    row = next(r for r in doc["rows"] if r["row"] == "mask-fill-zero-numpy")
    row["cells"]["known_answers"]["verdict"] = "survived"
    subset = report_with(doc)
    del subset.cells[("no-scaling-sdpa", "causality")]
    assert not subset.is_whole()
    assert finish(subset) == pytest.ExitCode.OK and subset.drift is None
    other_seed = report_with(doc, seed=1)
    assert finish(other_seed) == pytest.ExitCode.OK and other_seed.drift is None


def test_compare_ignores_message_text():
    doc = committed()
    changed = json.loads(json.dumps(doc))
    changed["rows"][0]["cells"]["known_answers"]["message"] = "reworded"
    assert compare(doc, changed) == []


# -- attnzoo gpu counts crashes, as check does --------------------------------------------------


@pytest.fixture
def one_column(monkeypatch, tmp_path):
    """The gpu table on the CPU, one backend × one dtype, with a kernel of the test's own."""
    monkeypatch.setattr(gpu, "BACKENDS", ("MATH",))
    monkeypatch.setattr(gpu, "DTYPES", ("float32",))

    def run(kernel):
        monkeypatch.setattr(gpu, "Kernel", kernel)
        out = tmp_path / "gpu.json"
        code = gpu.run("cpu", str(out), None)
        return code, json.loads(out.read_text())

    return run


class Crashing:
    def __init__(self, backend):
        pass

    def __call__(self, query, key, value, **kwargs):
        raise RuntimeError("illegal memory access")


class Refusing(Crashing):
    def __call__(self, query, key, value, **kwargs):
        raise RuntimeError("No available kernel. Aborting execution.")


def test_gpu_exits_1_when_a_kernel_crashes(one_column, capsys):
    code, doc = one_column(Crashing)
    verdicts = {c["verdict"] for c in doc["cells"].values()}
    assert "crashed" in verdicts and verdicts <= {"crashed", "n/a"}, verdicts
    assert code == 1


def test_gpu_refusals_are_not_crashes(one_column, capsys):
    code, doc = one_column(Refusing)
    verdicts = {c["verdict"] for c in doc["cells"].values()}
    assert "unsupported" in verdicts and "crashed" not in verdicts, verdicts
    assert code == 0
    assert "unsup" in capsys.readouterr().out


def test_gpu_exit_code_follows_check():
    assert gpu.exit_code({("a", "c"): {"verdict": "survived"}}) == 0
    assert gpu.exit_code({("a", "c"): {"verdict": "crashed"}}) == 1
    assert gpu.exit_code({("a", "c"): {"verdict": "error"}}) == 3
    assert gpu.exit_code({("a", "c"): {"verdict": "unsupported"}}) == 0


# -- exercise 4's completion check does real work ----------------------------------------------


def test_mutants_check_notices_a_detector_taken_away(monkeypatch, capsys):
    from attnzoo.devtools import mutants

    path = REPO / "docs" / "mutants.json"
    assert mutants.check(path) == 0
    fewer = [d for d in mutants.all_detectors() if d.NAME != "dtype_follows_input"]
    monkeypatch.setattr(mutants, "all_detectors", lambda: fewer)  # the suite mutants reads
    assert mutants.check(path) == 1
    out = capsys.readouterr().out
    assert "causal_mask__mutmut_" in out and "(only dtype_follows_input killed it)" in out


# -- a regular install works from anywhere -----------------------------------------------------


@pytest.mark.slow
def test_a_regular_install_works_from_another_folder(tmp_path):
    """``pip install .`` (not -e) into a folder of its own, the source tree deleted after: check,
    list and show work from another folder, and the developer tools say in one line that they
    need the checkout. (numpy and torch come from this environment; the installed copy comes
    first on the path, ahead of the editable install's finder.)"""
    src, site, elsewhere = tmp_path / "src", tmp_path / "site", tmp_path / "elsewhere"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".ci", "mutants", "__pycache__", "*.egg-info", "build"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(site), str(src)],
                   check=True, capture_output=True, timeout=600)
    shutil.rmtree(src)  # nothing may point back into a source tree
    elsewhere.mkdir()
    shutil.copyfile(REPO / "reference" / "lesson_numpy.py", elsewhere / "mine.py")
    env = dict(os.environ, PYTHONPATH=str(site))

    def run(*args):
        return subprocess.run([sys.executable, "-m", "attnzoo", *args], cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=300)

    location = subprocess.run([sys.executable, "-c", "import attnzoo, zoo; "
                               "print(attnzoo.__file__, zoo.__file__)"], cwd=elsewhere, env=env,
                              capture_output=True, text=True).stdout.split()
    assert all(Path(f).is_relative_to(site) for f in location), location
    p = run("check", "mine.py")
    assert p.returncode == 0 and p.stdout.splitlines()[-1].endswith("— conformant"), p.stdout
    p = run("list")
    assert p.returncode == 0 and p.stdout.splitlines()[-1] == \
        f"{len(zoo.BUGS)} bugs, {len(zoo.DECOYS)} decoys", p.stderr
    p = run("show", "mask-fill-zero")
    assert p.returncode == 0 and "file:      zoo/mask_fill_zero.py" in p.stdout, p.stderr
    assert "--- reference/lesson_numpy.py LessonNumpy.attention" in p.stdout
    p = run("docs", "--check")
    assert p.returncode == 2 and "run it from the repository" in p.stderr, p.stderr
