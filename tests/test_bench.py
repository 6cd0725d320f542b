"""``attnzoo bench``: the parts its comparisons stand on.

``--against REV``: the earlier matrix runs from its own tree, never this one. Running both
matrices takes minutes, so the whole comparison is left to the command; here, the commit's
files are what runs, through the console script that commit declares, even where a package of
the same name is installed from this checkout. ``--flagged``: its target is flagged where it
should be, and the command runs both checks and reports them (on the quick battery: the deep
comparison takes minutes).
"""

import json
import subprocess

import pytest

from attnzoo.checking import BadInput
from attnzoo.devtools import against


def git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.fixture
def history(tmp_path):
    """A repository whose first commit has an ``attnzoo`` package of its own, and whose second
    removes the console script: (folder, first commit, second commit)."""
    repo = tmp_path / "repo"
    (repo / "attnzoo").mkdir(parents=True)
    (repo / "attnzoo" / "__init__.py").write_text("")
    (repo / "attnzoo" / "cli.py").write_text(
        "def main(argv):\n    print('the earlier tree', *argv)\n    return 0\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n'
                                         '[project.scripts]\nattnzoo = "attnzoo.cli:main"\n')
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    first = against.commit("HEAD", repo)
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n')
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "second")
    return repo, first, against.commit("HEAD", repo)


def test_the_commit_runs_its_own_code(history):
    repo, first, _ = history
    (repo / "attnzoo" / "cli.py").write_text("def main(argv):\n    return 3\n")  # uncommitted
    with against.tree(first, repo) as folder:
        done = subprocess.run(against.console_command(folder, ["matrix", "--jobs", "1"]),
                              cwd=folder, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "the earlier tree matrix --jobs 1"
    assert not folder.exists()  # the tree is removed afterwards


def test_a_commit_without_the_console_script_is_bad_input(history):
    repo, _, second = history
    with against.tree(second, repo) as folder, pytest.raises(BadInput, match="console script"):
        against.console_command(folder, ["matrix"])


def test_an_unknown_commit_is_bad_input(history):
    repo, _, _ = history
    with pytest.raises(BadInput, match="no such commit"):
        against.commit("no-such-branch", repo)


def test_the_flagged_target_is_flagged_past_its_first_key_tile():
    """``bench --flagged`` compares a flagged check with a clean one: its target must be
    flagged where keys pass one tile of 64 (standard), and exact within one tile (quick)."""
    from attnzoo.checking import run_check
    from attnzoo.devtools.bench import ROOT
    from attnzoo.devtools.flagged import FLAGGED
    from attnzoo.options import Options

    target, only = f"{ROOT}/{FLAGGED}", ["matches_loop_oracle"]
    sections, _, _, code = run_check(target, Options.build(only=only, depth="standard",
                                                           shrink=False))
    assert code == 1, sections[0]["findings"][0].message
    assert sections[0]["findings"][0].caught
    _, _, _, code = run_check(target, Options.build(only=only, depth="quick"))
    assert code == 0


def test_the_flagged_bench_times_both_checks_in_turn(tmp_path, capsys):
    """The wiring, on the quick battery and one run each: both checks run, the JSON holds each
    side's figures and the ratios, and a comparison in which the flagged target was not flagged
    (quick's keys fit one tile) says so and exits 1."""
    from attnzoo.cli import main

    out = tmp_path / "flagged.json"
    code = main(["bench", "--flagged", "--repeats", "1", "--depth", "quick", "--output",
                 str(out)])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert code == 1, printed
    assert report["depth"] == "quick" and report["budget"] == 1.5
    for side in ("flagged", "tiled", "clean"):
        assert report[side]["runs"] == 1 and report[side]["exit_codes"] == [0]
        assert report[side]["calls"] > 0 and report[side]["wall"]["median"] > 0
        assert report[side]["command"].endswith("--depth quick --json")
    assert "flagged_tiled.py:SDPA" in report["flagged"]["command"]
    assert "scaled_dot_product_attention" in report["clean"]["command"]
    assert "tiled_kernel.py:SDPA" in report["tiled"]["command"]
    assert report["wall_ratio_pairs"]["median"] == pytest.approx(
        report["flagged"]["wall"]["median"] / report["tiled"]["wall"]["median"], abs=1e-3)
    assert report["wall_ratio_pairs_sdpa"]["median"] == pytest.approx(
        report["flagged"]["wall"]["median"] / report["clean"]["wall"]["median"], abs=1e-3)
    assert report["void"] == ["the flagged target's check exited 0, not 1"]
    assert "void: the flagged target's check exited 0, not 1" in printed
    assert "flagged / the same kernel without its defect, wall:" in printed
    assert "flagged / torch's SDPA, wall:" in printed


def test_against_compares_a_check_from_each_tree(tmp_path):
    """``--against REV --check LOCATOR``: the check runs today and at REV, each from its tree,
    and the calls each made are read from its own JSON."""
    report = against.compare("HEAD", 1, check=["reference/lesson_numpy.py", "--depth", "quick",
                                                "--only", "known_answers"])
    assert report["today"]["command"].startswith("attnzoo check reference/lesson_numpy.py")
    assert report["today"]["cells"] == report["then"]["cells"] > 0
    assert "| check | calls |" in against.render(report)


def test_a_larger_matrix_is_told_apart_into_its_shared_cells_and_the_rest():
    """The cells both matrices have are timed on each side apart from the cells only today's
    has, and the calls are counted, so a budget on the whole can be read by its parts."""
    then = {("reference-numpy", "causality"): (10, 1.0), ("gone-numpy", "causality"): (5, 9.0)}
    today = {("reference-numpy", "causality"): (12, 1.5), ("new-numpy", "causality"): (30, 3.0)}
    figures = {"today": {"cpu": {"median": 42.0}}, "then": {"cpu": {"median": 15.0}}}
    report = against._growth({"today": [today, dict(today)], "then": [then]}, figures)
    assert report["calls"] == {"today": 42, "then": 15}
    assert report["cpu_per_call_ratio"] == 1.0  # 1 s a call on both sides
    assert report["shared_cells"] == {"cells": 1, "calls": 12,
                                      "seconds": {"today": 1.5, "then": 1.0}, "ratio": 1.5}
    sentence = against.growth(report)
    assert "42 today, 15 then (2.80×)" in sentence
    assert "The 1 cells both matrices have" in sentence and "(1.500 of then)" in sentence
