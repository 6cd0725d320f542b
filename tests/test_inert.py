"""Text from the code under test reaches no terminal as it is.

A target's exception message, its declared refusals, a graded suite's test ids and failure text
are written by the code under test. ``tests/targets/ansi.py`` raises a message that would clear
the screen and draw a fake "conformant" summary over the real one; every report of it (the text,
``--json``, the pytest plugin's, a bad target's one line) must show that text with its control
characters as visible escapes, and still tell the truth.
"""

import json
import os
import re
import subprocess

from test_cli import PYTHON, REPO, TARGETS, console, one_error_line, only

from attnzoo.grade import model, render
from attnzoo.grade.run import Suite, SuiteError
from attnzoo.inert import inert

# what must never reach a terminal: C0 but newline, DEL, C1, bidirectional and line separators
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
ANSI = f"{TARGETS}/ansi.py:sdpa"
FAKE = "\\x1b[2J\\x1b[H\\x1b]0;all clear\\x07\\x1b[1Gsummary: 30 passed"  # as it is shown


def strings(doc):
    """Every string of a JSON document, keys included."""
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield k
            yield from strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from strings(v)


def test_every_control_character_becomes_a_visible_escape():
    controls = "".join(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]) + "\u202e\u2066\u2028"
    shown = inert("a" + controls + "b")
    assert not RAW.search(shown) and "\n" not in shown and "\t" not in shown
    assert shown.startswith("a\\x00\\x01") and "\\n" in shown and "\\x1b" in shown
    assert shown.endswith("\\x9f\\u202e\\u2066\\u2028b")
    assert inert("one\n\ttwo\x1b[2J", lines=True) == "one\n\ttwo\\x1b[2J"  # lines keep shape
    assert inert(shown) == shown  # escaping twice changes nothing more
    assert inert("No kernel\x1b") in inert("raised: No kernel\x1b[0m")  # refusals still match
    assert inert("plain text — ünïcode, 注意, emoji 🙂") == "plain text — ünïcode, 注意, emoji 🙂"


def test_a_target_cannot_draw_over_the_text_report():
    p = console("check", ANSI, "--depth", "quick", *only("known_answers", "causality"))
    assert p.returncode == 1, p.stderr
    assert not RAW.search(p.stdout) and not RAW.search(p.stderr)
    assert FAKE in p.stdout  # shown, as the text it is
    assert "refusals it names: '\\x1b[2J" in p.stdout
    assert p.stdout.splitlines()[-1].endswith("— NOT conformant")
    summaries = [ln for ln in p.stdout.splitlines() if ln.startswith("summary: ")]
    assert len(summaries) == 1 and "2 flagged (2 crashed)" in summaries[0]


def test_a_target_cannot_put_control_characters_in_the_json_report():
    p = console("check", ANSI, "--depth", "quick", "--json", *only("known_answers", "causality"))
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert not RAW.search(p.stdout)  # C1 and bidirectional characters are not escaped by JSON
    bad = [s for s in strings(doc) if RAW.search(s)]
    assert bad == [], bad[:3]
    messages = [f["message"] for impl in doc["implementations"] for f in impl["findings"]]
    assert any(FAKE in m for m in messages)
    assert doc["summary"]["conformant"] is False


def test_a_target_cannot_draw_over_the_plugins_report(tmp_path):
    p = subprocess.run([PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "--color=no",
                        "-o", "addopts=", f"--rootdir={tmp_path}", "--attnzoo-depth", "quick",
                        "--attnzoo-target", str(REPO / ANSI), "--attnzoo-only", "known_answers"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout[-2000:]
    assert FAKE in p.stdout and not RAW.search(p.stdout + p.stderr)


def test_a_message_raised_while_importing_is_one_inert_line():
    line = one_error_line(console("check", ANSI, env=dict(os.environ, ATTNZOO_TEST_ON_IMPORT="1")))
    assert "failed to import: RuntimeError: \\x1b[2J" in line and not RAW.search(line)


def test_a_graded_suite_cannot_draw_on_the_terminal(tmp_path):
    """Its file name (in every test id), a failure message and a collection error."""
    suite = tmp_path / "test_\x07\x1bcsuite.py"  # bell, then a full reset of the terminal
    suite.write_text("def test_shouts(attention):\n"
                     "    assert False, '\\x1b[2J\\x1b[Hall tests pass\\x9b'\n")
    doc = model.grade(Suite(suite), select=lambda r: r.id == "reference")
    shown = render.text(doc) + json.dumps(doc, ensure_ascii=False)
    assert not RAW.search(shown)
    alarm, = doc["false_alarms"]
    assert "test_\\x07\\x1bcsuite.py::test_shouts" in alarm["test"]
    assert "\\x1b[H" in alarm["text"] and "\\x9b" in alarm["text"]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "test_broken.py").write_text("raise ImportError('\\x1b[2Jgone')\n")
    try:
        model.grade(Suite(broken), select=lambda r: r.id == "reference")
    except SuiteError as e:
        assert "\\x1b[2Jgone" in str(e) and not RAW.search(str(e))
    else:
        raise AssertionError("a suite that does not collect is bad input")
