"""The report names the zoo entries a flagged target behaves like (attnzoo.diagnosis.known):
the closest detector signatures of the committed kill matrix, never a verdict of their own."""

import json
import re

from attnzoo.diagnosis.known import CLOSE, NAMED, resembling
from tests.test_cli import attnzoo


def finding(detector, verdict):
    return {"detector": detector, "verdict": verdict}


def matrix(*rows):
    """A kill matrix of bug rows: (id, backend, detectors that catch it)."""
    return {"rows": [{"kind": "bug", "id": i, "backend": b,
                      "cells": {d: {"cell": "hit"} for d in caught}} for i, b, caught in rows]}


RUN = [finding(d, "survived") for d in ("a", "b", "c", "d")]


def flagged(*names):
    return [finding(d, "killed") if d in names else f
            for d, f in ((f["detector"], f) for f in RUN)]


def test_closest_first_by_jaccard_and_only_past_the_threshold():
    m = matrix(("no-scaling", "sdpa", "ab"), ("mask-fill-zero", "sdpa", "abc"),
               ("large-negative-fill", "sdpa", "cd"))
    got = resembling(flagged("a", "b"), "sdpa", "torch", m)
    assert [(r["id"], r["similarity"]) for r in got] == [("no-scaling", 1.0),
                                                         ("mask-fill-zero", 0.67)]
    assert got[0]["shared"] == ["a", "b"] and got[0]["page"] == "docs/catalogue/no-scaling.md"
    assert all(r["similarity"] >= CLOSE for r in got) and len(got) <= NAMED


def test_rows_of_another_contract_and_detectors_not_run_are_left_out():
    m = matrix(("no-scaling", "numpy", "ab"), ("mask-fill-zero", "sdpa", "abz"))
    got = resembling(flagged("a", "b"), "sdpa", "torch", m)
    assert [r["id"] for r in got] == ["mask-fill-zero"]  # z was not run: it does not count
    assert got[0]["similarity"] == 1.0
    assert [r["id"] for r in resembling(flagged("a", "b"), "lesson", "numpy", m)] == \
        ["no-scaling"]


def test_nothing_flagged_names_nothing():
    assert resembling(RUN, "sdpa", "torch", matrix(("no-scaling", "sdpa", "ab"))) == []


def test_a_check_names_the_entry_it_behaves_like():
    done = attnzoo("check", "tests/targets/naive_sdpa.py:sdpa", "--depth", "quick", "--json")
    assert done.returncode == 1, done.stderr
    (impl,) = json.loads(done.stdout)["implementations"]
    assert impl["resembles"][0]["id"] == "fully-masked-row-nan", impl["resembles"]
    text = attnzoo("check", "tests/targets/naive_sdpa.py:sdpa", "--depth", "quick").stdout
    assert re.search(r"^  - fully-masked-row-nan \(\d+ detectors shared, similarity 1\): Guard",
                     text, re.MULTILINE), text
