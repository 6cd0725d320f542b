"""Where the project's checkout is: the developer tools write docs/ and run tests/ there.

``attnzoo check``, ``list`` and ``show`` need only the installed packages; ``docs``, ``mutants``
and ``bench`` need the repository. An editable install finds it above the package; a regular
install (``pip install .``) finds it from the current folder, or says where to run.
"""

from pathlib import Path

from attnzoo.checking import BadInput


def is_checkout(folder):
    folder = Path(folder)
    return ((folder / "pyproject.toml").is_file() and (folder / "zoo" / "__init__.py").is_file()
            and (folder / "reference").is_dir() and (folder / "tests").is_dir())


def find():
    """The checkout holding this package, else the current folder or one above it; or None."""
    here = Path(__file__).resolve().parents[2]
    cwd = Path.cwd().resolve()
    for folder in (here, cwd, *cwd.parents):
        if is_checkout(folder):
            return folder
    return None


def root(command):
    """The checkout, or one line saying where ``command`` must run."""
    folder = find()
    if folder is None:
        raise BadInput(f"{command} works on a checkout of attention-bug-zoo (docs/, tests/, "
                       "pyproject.toml): run it from the repository")
    return folder
