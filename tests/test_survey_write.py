"""The survey page presents each implementation's findings by root cause.

``tests/data/survey_two_causes.json`` is a recorded result in the survey's shape: a real check
(quick, four detectors) of ``tests/targets/root_causes.py:two_causes``, a target with two
independent root causes, with its diagnosis. The whole survey is not rerun here.
"""

import json
from pathlib import Path

from attnzoo.survey.write import markdown, write

RECORDED = Path(__file__).parent / "data" / "survey_two_causes.json"


def recorded():
    return json.loads(RECORDED.read_text(encoding="utf-8"))


def test_findings_are_presented_by_root_cause_with_the_smallest_call():
    doc = recorded()
    page = markdown(doc)
    run = doc["implementations"][0]["runs"][0]
    assert page.count("#### ") == len(run["diagnosis"]) == 2
    assert "Findings by root cause: 2." in page
    for n, group in enumerate(run["diagnosis"], 1):
        head = f"#### {n}. two-causes 0.0 at float64: {group['explains']}"
        assert head in page
        section = page.split(head, 1)[1].split("####", 1)[0]
        assert group["sentence"] in section
        assert f"`{group['smallest']['call']}`" in section
        assert f"case `{group['smallest']['case']}`" in section
    assert page.index("#### 2.") < page.index("Flagged detectors (detail):")


def test_a_short_reproduction_is_inlined_and_a_long_one_points_to_the_json():
    doc = recorded()
    group = doc["implementations"][0]["runs"][0]["diagnosis"][0]
    group["smallest"]["snippet"] = "import torch\nr1 = impl(q, k, v)"
    page = markdown(doc)
    assert "```python\nimport torch\nr1 = impl(q, k, v)\n```" in page
    group["smallest"]["snippet"] = "\n".join(["x = 1"] * 40)
    assert "Reproduction: 40 lines, in survey.json" in markdown(doc)


def test_a_crash_that_needs_earlier_calls_is_not_called_a_reproduction():
    """Its call answers alone in a fresh process: the page says so instead of offering the call
    as the crash's reproduction."""
    doc = recorded()
    group = doc["implementations"][0]["runs"][0]["diagnosis"][1]
    group.update(feature="after_earlier_calls", features=["after_earlier_calls"])
    section = markdown(doc).split("#### 2.", 1)[1].split("####", 1)[0]
    assert "The call that died (alone in a fresh process it answers" in section
    assert "Smallest reproducing call" not in section


def test_unexplained_failures_are_said_so_and_an_old_document_keeps_its_layout(tmp_path):
    doc = recorded()
    run = doc["implementations"][0]["runs"][0]
    run["diagnosis"][1].update(feature=None, explains="no single feature explains these")
    page = markdown(doc)
    assert "Findings by root cause: 1 and failures no single feature explains." in page
    assert "#### 2. two-causes 0.0 at float64: No single feature explains these" in page
    del run["diagnosis"]  # recorded before the diagnosis: the per-detector list, as before
    old = markdown(doc)
    assert "Findings by root cause" not in old and "- **gqa_head_mapping** (killed)" in old
    json_path, md_path = write(recorded(), tmp_path)
    assert json.loads(json_path.read_text(encoding="utf-8")) == recorded()
    assert md_path.read_text(encoding="utf-8") == markdown(recorded())


def test_the_command_line_summary_counts_root_causes():
    from attnzoo.survey.run import line

    row = recorded()["implementations"][0]
    assert "3 flagged (3 killed) from 2 root causes" in line(row)
