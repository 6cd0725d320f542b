"""A suite that tries to change files outside its run (for tests/test_grade_confine.py): each
test passes only where the attempt is refused, so a test that passes means the run was confined.
An attempt that gets through is undone at once (nothing is written into an existing file, a file
it created is removed) and the test fails."""
import os
import pwd
import sysconfig
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[3]
NAME = "attnzoo-escape-probe"


def _refused_to_append(path):
    """Opening an existing file for writing is refused; if not, nothing is written."""
    with pytest.raises(OSError):
        with open(path, "ab"):
            pass


def _refused_to_create(folder):
    path = Path(folder) / NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return
    os.close(fd)
    os.unlink(path)
    pytest.fail(f"created {path}")


def _fine(attention):
    assert attention.causal_mask(2).shape == (2, 2)


def test_a_zoo_file(attention):
    _refused_to_append(PROJECT / "zoo" / "__init__.py")
    _refused_to_create(PROJECT / "zoo")
    _fine(attention)


def test_the_projects_files(attention):
    _refused_to_append(PROJECT / "README.md")
    _refused_to_append(Path(__file__))
    _refused_to_create(PROJECT)
    _refused_to_create(Path(__file__).parent)
    _fine(attention)


def test_a_pth_file_in_site_packages(attention):
    _refused_to_create(sysconfig.get_paths()["purelib"])
    with pytest.raises(OSError):
        os.open(Path(sysconfig.get_paths()["purelib"]) / f"{NAME}.pth",
                os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    _fine(attention)


def test_the_users_home(attention):
    """The home of the account, not HOME (which is the run's scratch)."""
    _refused_to_create(pwd.getpwuid(os.getuid()).pw_dir)
    _fine(attention)


def test_its_scratch_takes_writes(tmp_path, attention):
    """The scratch directory (TMPDIR, HOME, pytest's tmp_path) is where a run writes."""
    assert str(tmp_path).startswith(os.environ["TMPDIR"])
    assert os.environ["HOME"] == os.environ["TMPDIR"]
    (tmp_path / "written").write_text("scratch takes writes")
    assert (tmp_path / "written").read_text() == "scratch takes writes"
    _fine(attention)
