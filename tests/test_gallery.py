"""The gallery of generated kernels: docs/generated-kernels.md is what the committed JSON gives,
the JSON covers exactly the zoo's generated entries, and what it records makes the page's point:
a weak check passes some of them, attnzoo flags every one."""

import json
import shutil

import pytest
import torch

from attnzoo.devtools import gallery

ROOT = gallery.ROOT


@pytest.fixture(scope="module")
def doc():
    return gallery.load(ROOT)


def test_the_page_is_what_the_committed_json_gives(doc):
    have = (ROOT / gallery.PAGE).read_text(encoding="utf-8")
    assert have == gallery.page(doc), "run `attnzoo docs --from-json docs/kill-matrix.json`"


def test_the_json_holds_exactly_the_zoos_generated_entries(doc):
    ids = [r["id"] for r in doc["entries"]]
    zoo_ids = [e.id for e in gallery.entries()]
    assert zoo_ids, "the zoo has no entry of category 'generated'"
    assert sorted(ids) == sorted(zoo_ids), "run `attnzoo docs` to measure the gallery again"


def test_some_generated_entry_passes_the_kernelbench_style_check(doc):
    passing = [r["id"] for r in doc["entries"] if r["kernelbench"]["passes"]]
    assert passing, "no generated entry passes allclose(1e-2): the gallery shows nothing"


def test_attnzoo_flags_every_generated_entry_at_its_depth(doc):
    missed = []
    for r in doc["entries"]:
        at = r["quick"] if r["depth"] == "quick" else r["budget"]
        if not at["flagged"]:
            missed.append(f"{r['id']} (depth {r['depth']})")
    assert not missed, f"attnzoo flags nothing on {', '.join(missed)}"


def test_the_kernelbench_style_check_accepts_sdpa_and_rejects_zeros(monkeypatch):
    monkeypatch.setattr(gallery, "SHAPE", (1, 2, 64, 32))
    right = gallery.kernelbench(torch.nn.functional.scaled_dot_product_attention)
    assert right["passes"] and right["trials_passed"] == gallery.TRIALS
    zeros = gallery.kernelbench(lambda q, k, v: torch.zeros_like(v))
    assert not zeros["passes"] and zeros["trials_passed"] == 0
    assert zeros["max_error"] > gallery.ATOL


def test_the_trial_seeds_are_kernelbenchs():
    torch.manual_seed(gallery.SEED)
    want = [torch.randint(0, 10**7, (1,)).item() for _ in range(gallery.TRIALS)]
    assert gallery.trial_seeds() == want and len(set(want)) == gallery.TRIALS


def test_a_changed_json_makes_the_page_stale_and_write_mends_it(tmp_path):
    for path in (gallery.JSON_PATH, gallery.PAGE):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    assert gallery.stale(tmp_path) == []
    data = json.loads((tmp_path / gallery.JSON_PATH).read_text(encoding="utf-8"))
    data["entries"][0]["title"] += " (retitled)"
    (tmp_path / gallery.JSON_PATH).write_text(json.dumps(data), encoding="utf-8")
    assert [p for p, _ in gallery.stale(tmp_path)] == [gallery.PAGE.as_posix()]
    assert gallery.write(root=tmp_path) == [gallery.PAGE.as_posix()]
    assert gallery.stale(tmp_path) == []


def test_a_json_missing_an_entry_is_stale(tmp_path):
    (tmp_path / gallery.JSON_PATH).parent.mkdir(parents=True)
    data = gallery.load(ROOT)
    data["entries"] = data["entries"][1:]
    (tmp_path / gallery.JSON_PATH).write_text(json.dumps(data), encoding="utf-8")
    gallery.write(root=tmp_path)
    why = dict(gallery.stale(tmp_path))
    assert list(why) == [gallery.JSON_PATH.as_posix()]
    assert gallery.load(ROOT)["entries"][0]["id"] in why[gallery.JSON_PATH.as_posix()]
