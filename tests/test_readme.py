"""CI runs exactly what the README tells a newcomer to run."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commands(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    return [lines[i + 1].strip() for i, line in enumerate(lines)
            if line.strip().startswith("# README: ")]


def test_ci_runs_the_readme_install_and_test_commands():
    install, test, app = commands(ROOT / ".ci" / "run")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert install in readme and test in readme and app in readme
    assert '-m "app and not slow"' in app, "CI runs the application's tests too"
    assert "torch==2.13.0" in install, "the CPU wheel must be pinned where CI installs it"
