"""The varlen contract's generated docs never drift from its zoo: ``docs/kill-matrix-varlen.json``
covers every varlen bug, decoy and the reference, its verdicts say what the entries' metadata
says, and the pages built from it are the committed ones (``attnzoo docs --check``). When a test
here fails, run ``attnzoo docs --contract varlen`` (the varlen matrix alone, under a minute) and
commit what it writes.
"""

import dataclasses

import pytest

import zoo.varlen as varlen_zoo
from attnzoo import cli
from attnzoo.devtools import docs
from attnzoo.devtools.docs import varlen_data
from attnzoo.vocabulary import CAUGHT_CELLS

ROOT = docs.ROOT
DATA = docs.load(ROOT / docs.VARLEN_JSON)
REGENERATE = "run `attnzoo docs --contract varlen` and commit docs/"


def caught(row):
    return {d for d, c in row["cells"].items() if c["cell"] in CAUGHT_CELLS}


def test_the_json_covers_the_varlen_zoo_and_detectors():
    assert varlen_data.coverage(DATA) == [], REGENERATE
    ids = {r["id"] for r in DATA["rows"]}
    assert ids == {"reference"} | {e.id for e in varlen_zoo.BUGS + varlen_zoo.DECOYS}
    assert DATA["seed"] == 0 and DATA["versions"]["torch"]


def test_every_bug_is_caught_by_its_caught_by_where_the_test_checks_it():
    """The JSON says what tests/test_varlen_detectors.py asserts: at the harness's default
    tier each bug is caught by exactly its caught_by; at the tier it shows at, by one or more."""
    standard = DATA["caught_by_depth"]
    for entry in varlen_zoo.BUGS:
        rows = {r["depth"]: r for r in DATA["rows"] if r["id"] == entry.id}
        assert set(rows) >= {standard, entry.meta.depth}, (entry.id, set(rows))
        assert caught(rows[standard]) == set(entry.meta.caught_by), entry.id
        assert caught(rows[entry.meta.depth]), entry.id


def test_the_reference_and_the_decoys_raise_no_false_alarm_at_any_tier():
    clean = [r for r in DATA["rows"] if r["kind"] != "bug"]
    assert {r["depth"] for r in clean} == {r["depth"] for r in DATA["rows"]}
    assert all(r["dtypes"] == list(varlen_data.CLEAN_DTYPES) for r in clean)
    flagged = [(r["row"], d) for r in clean for d, c in r["cells"].items() if c["cell"] != "pass"]
    assert flagged == []
    assert DATA["summary"]["false_alarms"] == 0 and DATA["summary"]["failures"] == []


def test_a_declared_convention_is_what_the_row_was_run_under():
    declared = {r["id"]: r["conventions"] for r in DATA["rows"] if r["conventions"]}
    assert declared == {e.id: varlen_zoo.conventions(e) for e in varlen_zoo.DECOYS
                        if varlen_zoo.conventions(e)}
    assert "varlen-unmask-unattended" in declared


def test_check_names_the_page_of_a_varlen_bug_whose_text_changed(monkeypatch, capsys):
    before = {path for path, _ in docs.stale()}
    i = next(i for i, e in enumerate(varlen_zoo.BUGS) if e.id == "varlen-lse-in-log2")
    entry = varlen_zoo.BUGS[i]
    bugs = list(varlen_zoo.BUGS)
    bugs[i] = dataclasses.replace(entry, meta=dataclasses.replace(
        entry.meta, lesson="Return the LSE in some other base."))
    monkeypatch.setattr(varlen_zoo, "BUGS", bugs)
    after = {path for path, _ in docs.stale()}
    assert after - before == {"docs/catalogue/varlen-lse-in-log2.md"}
    assert cli.main(["docs", "--check"]) == 1
    assert "stale: docs/catalogue/varlen-lse-in-log2.md" in capsys.readouterr().out


def test_check_notices_a_varlen_bug_added_without_regenerating(monkeypatch):
    entry = varlen_zoo.BUGS[0]
    twin = dataclasses.replace(entry, meta=dataclasses.replace(entry.meta, id=entry.id + "-twin"))
    monkeypatch.setattr(varlen_zoo, "BUGS", varlen_zoo.BUGS + [twin])
    stale = docs.stale()
    assert (f"docs/catalogue/{twin.id}.md", "missing") in stale
    assert any(f"row {twin.id}@quick is in the varlen zoo but not in the JSON" in why
               for path, why in stale if path == docs.VARLEN_JSON.as_posix())


def test_check_notices_a_verdict_edited_by_hand(tmp_path):
    """The counts the pages state are recomputed from the cells: a summary that disagrees with
    them is stale."""
    data = docs.load(ROOT / docs.VARLEN_JSON)
    data["summary"]["false_alarms"] += 1
    assert varlen_data.coverage(data) == ["the summary is not what the cells give"]


def test_the_varlen_blocks_of_test_design_are_filled():
    text = (ROOT / docs.TEST_DESIGN).read_text(encoding="utf-8")
    blocks = {m.group("name"): m.group("body") for m in docs.BLOCK.finditer(text)}
    assert {"varlen-oracles", "varlen-categories"} <= set(blocks)
    kinds = {k for k in DATA["oracles"].values()}
    assert all(f"[{k}](#{k})" in blocks["varlen-oracles"] for k in kinds)
    index = (ROOT / "docs" / "catalogue" / "README.md").read_text(encoding="utf-8")
    assert "## The varlen contract" in index
    assert all(f"[`{e.id}`]({e.id}.md)" in index for e in varlen_zoo.BUGS)


@pytest.mark.parametrize("args", [["--contract", "varlen", "--check"],
                                  ["--contract", "varlen", "--from-json", "x.json"]])
def test_contract_varlen_runs_alone(args, capsys):
    assert cli.main(["docs", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--contract varlen" in err[0], err


@pytest.mark.slow
def test_the_committed_verdicts_are_todays():
    """Every cell's kind and verdict as the matrix gives them now (about 40 s)."""
    now = varlen_data.run(0)
    have = {(r["row"], d): (c["cell"], c["verdict"]) for r in DATA["rows"]
            for d, c in r["cells"].items()}
    want = {(r["row"], d): (c["cell"], c["verdict"]) for r in now["rows"]
            for d, c in r["cells"].items()}
    assert {k: (have.get(k), v) for k, v in want.items() if have.get(k) != v} == {}, REGENERATE
