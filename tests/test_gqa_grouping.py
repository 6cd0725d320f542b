"""A declared head grouping: ``gqa=interleaved`` (query head h reads key/value head h mod H_kv).

SDPA groups query heads contiguously (head h reads h // (H_q / H_kv)); x-transformers tiles its
key/value heads instead. Both are consistent choices a model trains with, so a target declares
its grouping and the harness reorders the query heads (and a per-head mask and the upstream
gradient) in and the answer's heads out: every detector judges SDPA's contract unchanged, as
with the (N, L, H, E) layout. Undeclared, the same target is one root cause: grouped heads.
"""

import json

import numpy as np
from test_cli import REPO, attnzoo

from detectors.kit.layout import heads_in, interleaving

TARGET = "tests/targets/gqa_interleaved.py:sdpa"


def test_the_reordering_gives_each_query_head_its_contiguous_key_value_head():
    for Hq, Hk in ((8, 2), (6, 3), (4, 4), (5, 1)):
        order, inverse = interleaving(Hq, Hk)
        g = Hq // Hk
        # sent head j is read by the kernel against key/value head j mod Hk ...
        assert all(order[j] // g == j % Hk for j in range(Hq)), (Hq, Hk)
        # ... and the answer's heads come back to the caller's order
        a = np.arange(2 * Hq * 3).reshape(2, Hq, 3, 1)
        assert (heads_in(heads_in(a, order), inverse) == a).all()


def test_a_mask_broadcast_over_heads_is_not_reordered():
    order, _ = interleaving(4, 2)
    mask = np.ones((2, 1, 3, 5), dtype=bool)
    assert heads_in(mask, order) is mask


def test_a_declared_interleaved_grouping_is_conformant():
    done = attnzoo("check", TARGET, "--depth", "quick")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "declared head grouping: interleaved" in done.stdout


def test_the_same_kernel_undeclared_is_one_root_cause_grouped_heads(tmp_path):
    source = (REPO / "tests/targets/gqa_interleaved.py").read_text()
    path = tmp_path / "undeclared.py"
    path.write_text(source.replace('ATTNZOO_UNSUPPORTED = ("gqa=interleaved",)', ""))
    done = attnzoo("check", f"{path}:sdpa", "--depth", "quick", "--json")
    impl = json.loads(done.stdout)["implementations"][0]
    causes = [g for g in impl["diagnosis"] if g["feature"]]
    assert done.returncode == 1 and impl["target"]["gqa_grouping"] == "contiguous"
    assert [g["feature"] for g in causes] == ["gqa"], [g["sentence"] for g in causes]
