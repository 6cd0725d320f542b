"""The README and the pages it sends readers to: what CI runs, where links go, which figures.

The README fits on one screen and tells a newcomer exactly what CI runs; everything else lives
in docs/, whose links must lead somewhere, and whose benchmark figures must be the ones the
measuring commands wrote.
"""

import functools
import json
import re
import shutil
from pathlib import Path

from attnzoo.devtools import bench_page
from attnzoo.devtools.docs.view import anchor

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MOST_LINES = 150  # one screen
# The README and every page of docs/ (the generated catalogue included).
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").glob("*/*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def commands(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    return [lines[i + 1].strip() for i, line in enumerate(lines)
            if line.strip().startswith("# README: ")]


def test_ci_runs_the_readme_install_and_test_commands():
    install, test, app = commands(ROOT / ".ci" / "run")
    readme = README.read_text(encoding="utf-8")
    assert install in readme and test in readme and app in readme
    assert '-m "app and not slow"' in app, "CI runs the application's tests too"
    assert "torch==2.13.0" in install, "the CPU wheel must be pinned where CI installs it"


def test_the_readme_fits_on_one_screen():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MOST_LINES, f"README.md has {lines} lines: move the detail to docs/"


@functools.cache
def anchors(path):
    """GitHub's anchors of a page's headings (a repeated heading gets -1, -2, …)."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen, out = {}, set()
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, re.M):
        a = anchor(m.group(1))
        out.add(f"{a}-{seen[a]}" if a in seen else a)
        seen[a] = seen.get(a, 0) + 1
    return out


def broken_links(path):
    """Relative links of a page whose file or heading does not exist."""
    out = []
    for target in LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        file, _, heading = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            out.append(f"{target} (no such file)")
        elif heading and dest.suffix == ".md" and heading not in anchors(dest):
            out.append(f"{target} (no such heading)")
    return out


def test_every_relative_link_leads_somewhere():
    broken = {p.relative_to(ROOT).as_posix(): b for p in PAGES if (b := broken_links(p))}
    assert not broken, broken


def test_a_link_to_a_missing_heading_is_broken(tmp_path):
    (tmp_path / "a.md").write_text("# A page\n\n## Its part\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text("[yes](a.md#its-part) [no](a.md#no-part) [gone](c.md) [self](#b)\n"
                    "```\n[in code](nowhere.md)\n```\n# B\n", encoding="utf-8")
    assert broken_links(page) == ["a.md#no-part (no such heading)", "c.md (no such file)"]


def test_no_page_states_a_date():
    """When a figure was measured is in its JSON (``machine``), not in prose. A web address
    may hold a date (a blog post's path): it names the page, it says nothing of this one."""
    dated = {p.relative_to(ROOT).as_posix():
             DATE.findall(re.sub(r"https?://\S+", "", p.read_text(encoding="utf-8")))
             for p in PAGES}
    assert not {p: d for p, d in dated.items() if d}


def test_the_benchmark_figures_are_the_ones_their_json_holds():
    assert bench_page.stale(ROOT) == [], "run `attnzoo docs --from-json docs/kill-matrix.json`"


def test_a_new_measurement_makes_the_benchmark_page_stale(tmp_path):
    for path in (bench_page.PAGE, *bench_page.SOURCES.values()):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / path, tmp_path / path)
    doc = json.loads((tmp_path / bench_page.SOURCES["bench"]).read_text(encoding="utf-8"))
    doc["pytest"]["wall"]["median"] = 61.234
    (tmp_path / bench_page.SOURCES["bench"]).write_text(json.dumps(doc), encoding="utf-8")
    assert [p for p, _ in bench_page.stale(tmp_path)] == [bench_page.PAGE.as_posix()]
    assert bench_page.write(tmp_path) == [bench_page.PAGE.as_posix()]
    assert bench_page.stale(tmp_path) == []
    page = (tmp_path / bench_page.PAGE).read_text(encoding="utf-8")
    assert "61.23 s" in page and "61.23 s, **over**" in page  # the test command's 60 s budget
