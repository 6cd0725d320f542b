"""``attnzoo bench --against REV``: the earlier matrix runs from its own tree, never this one.

Running both matrices takes minutes, so the whole comparison is left to the command; here, the
part a comparison stands on: the commit's files are what runs, through the console script that
commit declares, even where a package of the same name is installed from this checkout.
"""

import subprocess

import pytest

from attnzoo.check import BadInput
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
