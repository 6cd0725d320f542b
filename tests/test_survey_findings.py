"""Every root cause of the committed survey is read against its library's documentation.

Each adapter's ``FINDINGS`` reviews the root causes of docs/survey.json for its implementation
(:mod:`attnzoo.survey.findings`): one review per root cause, none left over from a survey no
longer committed, and the page shows each review's link under its root cause.
"""

import json
import shutil
from pathlib import Path

from attnzoo import cli
from attnzoo.survey import findings, write
from attnzoo.survey.capabilities import Review

DOCS = Path(__file__).resolve().parents[1] / "docs"


def committed():
    return json.loads((DOCS / "survey.json").read_text(encoding="utf-8"))


def causes(doc):
    """{(name, dtype, features): the diagnosis group} over the document."""
    return {(row["name"],) + findings.key(run, g): g for row in doc["implementations"]
            for run in row["runs"] for g in run.get("diagnosis") or ()}


def test_every_root_cause_has_a_review_and_no_review_is_stale():
    found = causes(committed())
    reviewed = {(name,) + k for name, by in findings.reviews().items() for k in by}
    assert sorted(found.keys() - reviewed, key=str) == [], "root causes nobody reviewed"
    assert sorted(reviewed - found.keys(), key=str) == [], "reviews of no committed root cause"


def test_the_page_shows_each_review_with_its_link_under_its_root_cause():
    doc = committed()
    page = write.markdown(doc)
    reviews = findings.reviews()
    for row in doc["implementations"]:
        for run in row["runs"]:
            for n, g in enumerate(run.get("diagnosis") or (), 1):
                head = f"#### {n}. {row['name']} {row['version']} at {run['dtype']}: "
                entry = page.split(head, 1)[1].split("####", 1)[0]
                review = reviews[row["name"]][findings.key(run, g)]
                if review.kind == "artefact":
                    assert f"not the library's fault. {review.note}" in entry
                    continue
                assert f"a {review.kind}. The [documentation]({review.docs}) says" in entry
                assert (review.issue in entry) if review.issue else True


def test_a_root_cause_without_a_review_says_so():
    doc = committed()
    page = write.markdown(doc, reviews={})
    assert page.count(findings.NOT_REVIEWED) == len(causes(doc))
    review = Review("float32", ("gqa",), "divergence", docs="https://example.org/doc",
                    says="it does.", issue="https://example.org/issue")
    line = findings.line(review)
    assert "[documentation](https://example.org/doc) says it does." in line
    assert "Upstream: https://example.org/issue." in line


def test_render_only_writes_the_page_from_the_json_without_running(tmp_path, capsys):
    shutil.copy(DOCS / "survey.json", tmp_path / "survey.json")
    assert cli.main(["survey", "--render-only", "--output-dir", str(tmp_path)]) == 0
    assert (tmp_path / "survey.md").read_text(encoding="utf-8") == write.markdown(committed())
    assert json.loads((tmp_path / "survey.json").read_text(encoding="utf-8")) == committed()
    empty = tmp_path / "none"
    empty.mkdir()
    assert cli.main(["survey", "--render-only", "--output-dir", str(empty)]) == 2
    assert "no " in capsys.readouterr().err
