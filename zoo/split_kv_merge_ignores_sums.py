"""Split-KV merge weighted by each split's max alone, without its sum.

Merging partial attention outputs is a softmax over the splits' log-sum-exps: split i weighs
l_i · exp(m_i − M). Weighing by exp(m_i − M) alone treats a split of 128 allowed keys like a
split of one: the result is still a convex mix of values, so nothing looks broken, but it is
not softmax over the keys. A cache of at most 128 keys is one split and comes out exact.
"""

import torch

from zoo import Bug
from zoo.decoys.split_kv import SplitKV

BUG = Bug(
    id="split-kv-merge-ignores-sums",
    title="Split-KV partial outputs merged by exp(m_i − M) without the sums l_i",
    category="softmax",
    symptom="silent",
    lesson="Merge partial softmaxes by their log-sum-exp (m_i + log l_i), never by their "
           "maxima alone.",
    source="",
    seen_in="flash-decoding and split-KV decode kernels whose combine step rescales each "
            "split by its max but forgets its normaliser",
    caught_by=("matches_loop_oracle",),
    depth="standard",
)


class Sdpa(SplitKV):
    def merge(self, parts):
        o, m, l = (torch.stack(x) for x in zip(*parts))  # (n, ..., l, Ev|1)
        top = torch.where(l > 0, m, -torch.inf).amax(dim=0)  # M over the non-empty splits
        top = torch.where(torch.isneginf(top), 0.0, top)
        w = torch.where(l > 0, torch.exp(m - top), 0.0)  # BUG: l_i · exp(m_i − M) without l_i
        total = w.sum(dim=0)
        return (w * o).sum(dim=0) / torch.where(total > 0, total, 1.0)


SDPA = Sdpa()
