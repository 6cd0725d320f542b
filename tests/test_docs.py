"""The generated docs never drift from the zoo: pages, kill-matrix JSON, heatmap, exercises.

``docs/catalogue/*.md``, the index and the numbers of ``docs/test-design.md`` are generated from
the zoo and the committed ``docs/kill-matrix.json``; when a test here fails, run ``attnzoo docs``
(the matrix, 2–3 minutes) or ``attnzoo docs --from-json docs/kill-matrix.json`` (seconds, when
only the zoo's text changed) and commit what it writes.
"""

import dataclasses
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import zoo
from attnzoo import cli
from attnzoo.devtools import docs
from attnzoo.matrix import model as matrix
from detectors import all_detectors, baseline_suites

ROOT = docs.ROOT
DATA = docs.load(ROOT / docs.JSON_PATH)
REGENERATE = "run `attnzoo docs` and commit docs/"


def _entry_index(entry_id):
    return next(i for i, e in enumerate(zoo.BUGS) if e.id == entry_id)


# -- (1) staleness ----------------------------------------------------------------------------


def test_committed_pages_are_what_the_committed_json_gives(capsys):
    code = cli.main(["docs", "--check"])
    out = capsys.readouterr().out
    assert code == 0, f"stale docs ({REGENERATE}):\n{out}"


def test_check_names_the_page_of_an_entry_whose_text_changed(monkeypatch, capsys):
    before = {path for path, _ in docs.stale()}
    i = _entry_index("mask-fill-zero")
    entry = zoo.BUGS[i]
    edited = dataclasses.replace(entry.meta, lesson="Fill masked scores with something else.")
    bugs = list(zoo.BUGS)
    bugs[i] = dataclasses.replace(entry, meta=edited)
    monkeypatch.setattr(zoo, "BUGS", bugs)
    after = {path for path, _ in docs.stale()}
    assert after - before == {"docs/catalogue/mask-fill-zero.md"}
    assert cli.main(["docs", "--check"]) == 1
    assert "stale: docs/catalogue/mask-fill-zero.md" in capsys.readouterr().out


def test_check_notices_an_entry_added_without_regenerating(monkeypatch):
    entry = zoo.BUGS[_entry_index("no-scaling")]
    twin = dataclasses.replace(entry, meta=dataclasses.replace(entry.meta, id="no-scaling-twin"))
    monkeypatch.setattr(zoo, "BUGS", zoo.BUGS + [twin])
    stale = dict(docs.stale())
    assert stale.get("docs/catalogue/no-scaling-twin.md") == "missing"
    assert any("row no-scaling-twin-numpy is in the zoo but not in the JSON" in why
               for path, why in docs.stale() if path == docs.JSON_PATH.as_posix())


def test_generated_blocks_of_test_design_are_filled():
    text = (ROOT / docs.TEST_DESIGN).read_text(encoding="utf-8")
    blocks = list(docs.BLOCK.finditer(text))
    names = {m.group("name") for m in blocks}
    assert {"oracle-table", "suites", "categories"} <= names
    kinds = {d.ORACLE for d in all_detectors()}
    assert {f"oracle:{k}" for k in kinds} <= names, "every oracle kind has its generated block"
    assert all(m.group("body").strip() for m in blocks), "an empty generated block: " + REGENERATE


# -- (2) the JSON covers the zoo as it is -----------------------------------------------------


def test_json_covers_exactly_the_current_rows_and_detectors():
    have = [(r["row"], r["kind"], r["id"], r["backend"]) for r in DATA["rows"]]
    want = [(r.label, r.kind, r.id, r.backend) for r in matrix.rows()]
    assert have == want, f"the zoo's rows changed since docs/kill-matrix.json: {REGENERATE}"
    assert DATA["detectors"] == [d.NAME for d in all_detectors()], REGENERATE
    assert DATA["baselines"] == [b.NAME for b in baseline_suites()], REGENERATE
    assert docs.coverage(DATA) == []


# -- (3) the JSON's verdicts are today's verdicts: the kill-matrix plugin compares every cell
# at the end of a whole run (attnzoo/matrix/plugin.py; tests/test_app.py tests the comparison).


# -- (4) the heatmap ----------------------------------------------------------------------------


def png_chunks(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}"
        chunks.append((kind, body))
        pos += 12 + length
    return chunks


def test_heatmap_is_a_valid_png_of_reasonable_size():
    path = ROOT / docs.PNG_PATH
    assert path.exists(), f"docs/kill-matrix.png is missing: {REGENERATE}"
    data = path.read_bytes()
    chunks = png_chunks(data)
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert 800 <= width <= 4000 and 1000 <= height <= 6000, (width, height)
    assert 50_000 <= len(data) <= 5_000_000, len(data)
    assert not any(kind == b"tIME" for kind, _ in chunks), "no timestamp: the PNG is deterministic"


# -- (5) every exercise's completion command works on the repository ---------------------------

DONE = re.compile(r"^# done when: exit (\d+)")
STAND_IN = re.compile(r"^# stand-in: (\S+) = (\S+)\s*$")


def done_blocks():
    """(id, expected exit status, stand-ins, commands) for every `# done when:` block."""
    text = (ROOT / "docs" / "exercises.md").read_text(encoding="utf-8")
    out, exercise = [], "intro"
    for m in re.finditer(r"^## (\d+)\.|^```bash\n(.*?)^```", text, re.M | re.S):
        if m.group(1):
            exercise, n = m.group(1), 0
            continue
        lines = m.group(2).splitlines()
        head = DONE.match(lines[0]) if lines else None
        if not head or exercise == "intro":
            continue
        n += 1
        stand_ins = [STAND_IN.match(line).groups() for line in lines if STAND_IN.match(line)]
        commands = [line for line in lines if line.strip() and not line.startswith("#")]
        out.append((f"exercise-{exercise}-{n}", int(head.group(1)), stand_ins, commands))
    return out


BLOCKS = done_blocks()


def test_every_exercise_says_when_it_is_done():
    exercises = {block[0].split("-")[1] for block in BLOCKS}
    assert exercises == {"1", "2", "3", "4", "5"}, exercises


@pytest.mark.parametrize("block", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_completion_command_works(block, tmp_path):
    _, status, stand_ins, commands = block
    assert commands, "a done-when block needs a command"
    script = "\n".join(commands)
    for name, thing in stand_ins:
        if (ROOT / thing).is_file():
            copy = tmp_path / name
            shutil.copyfile(ROOT / thing, copy)
            script = script.replace(name, str(copy))
        else:
            script = script.replace(name, thing)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", "set -e -o pipefail\n" + script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == status, (
        f"expected exit {status}, got {done.returncode} from:\n{script}\n"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")


def test_a_tolerance_measured_on_another_machine_leaves_the_committed_cell_alone():
    """``attnzoo docs`` on another machine measures other tolerances and last digits; a cell
    that says the same otherwise keeps the committed text, so unrelated pages stay as they are.
    A changed verdict, or a different failing value, is taken."""
    from attnzoo.devtools.docs import settled

    def doc(message, verdict="killed"):
        return {"rows": [{"row": "a-numpy", "cells": {"causality": {
            "cell": "caught", "verdict": verdict, "message": message,
            "evidence": {"snippet": "x = 1.0"}}}}]}

    committed = doc("expected 0.765749 (± 2.1e-10), got 0.785946 (off by 0.02)")
    elsewhere = doc("expected 0.7657491 (± 3.4e-10), got 0.785946 (off by 0.020)")
    kept = settled(committed, elsewhere)["rows"][0]["cells"]["causality"]
    assert kept["message"] == committed["rows"][0]["cells"]["causality"]["message"]
    other_value = doc("expected 0.765749 (± 2.1e-10), got 0.9 (off by 0.13)")
    taken = settled(committed, other_value)["rows"][0]["cells"]["causality"]
    assert taken["message"].endswith("got 0.9 (off by 0.13)")
    other_verdict = doc("expected 0.765749 (± 2.1e-10), got 0.785946 (off by 0.02)", "nan")
    assert settled(committed, other_verdict)["rows"][0]["cells"]["causality"]["verdict"] == "nan"
