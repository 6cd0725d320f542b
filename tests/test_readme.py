"""CI runs exactly what the README tells a newcomer to run."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commands(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    return [lines[i + 1].strip() for i, line in enumerate(lines)
            if line.strip() in ("# README: install", "# README: test")]


def test_ci_runs_the_readme_install_and_test_commands():
    install, test = commands(ROOT / ".ci" / "run")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert install in readme and test in readme
    assert "torch==2.13.0" in install, "the CPU wheel must be pinned where CI installs it"
