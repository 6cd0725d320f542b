"""Split-KV (flash-decoding): the keys split into pieces of 128, each attended alone, then merged.

Long decode caches are split so that many workers share one query: split i returns its
normalised output o_i, its max m_i and its sum l_i = Σ exp(s − m_i). The merge is the
log-sum-exp merge: with M the largest m_i, split i weighs w_i = l_i · exp(m_i − M), and
out = Σ w_i o_i / Σ w_i — exactly softmax over all the keys, because w_i / Σ w is split i's
share of the total softmax mass. An empty split (every key masked) has l_i = 0 and weighs 0.
Chunks, masks, causal blocks and scores come from :mod:`zoo.decoys.tiled_kernel`.
"""

import torch

from zoo import Decoy
from zoo.decoys.tiled_kernel import TiledSDPA

DECOY = Decoy(
    id="split-kv",
    title="Split-KV decoding: keys in splits of 128, partial outputs merged by log-sum-exp",
    technique="each split of 128 keys is a plain softmax with its own max and sum; the partial "
    "outputs are merged with weights l_i·exp(m_i − M), as flash-decoding does",
    why_correct="l_i·exp(m_i − M) is split i's share of Σ_j exp(s_j − M), so the weighted mean "
    "of the normalised partial outputs is softmax over every key; empty splits weigh 0",
)


class SplitKV(TiledSDPA):
    """TiledSDPA whose key loop is independent splits and one merge, not a running stream."""

    def __init__(self, split=128):
        super().__init__(k_tile=split)

    def attend_chunk(self, q, k, v, mask, bias, factor, causal, rows, dropout_p):
        parts = [self.partial(self.tile_scores(q, k, mask, bias, factor, causal, rows, cols),
                              v[..., cols[0]:cols[1], :], dropout_p)
                 for cols in self.key_tiles(k.shape[-2])]
        return self.merge(parts)

    def partial(self, s, v, dropout_p):
        """(o_i, m_i, l_i) of one split: its normalised output, max (0 if empty) and sum."""
        top = s.detach().amax(dim=-1, keepdim=True)  # (..., l, 1), a shift: no gradient
        m = torch.where(torch.isneginf(top), 0.0, top)
        p = torch.exp(s - m)  # (..., l, t), 0 where forbidden
        total = p.sum(dim=-1, keepdim=True)  # (..., l, 1), 0 for an empty split
        kept = torch.nn.functional.dropout(p, dropout_p) if dropout_p > 0 else p
        return kept @ v / torch.where(total > 0, total, 1.0), m, total

    def merge(self, parts):
        """out = Σ w_i o_i / Σ w_i with w_i = l_i · exp(m_i − M)."""
        o, m, l = (torch.stack(x) for x in zip(*parts))  # (n, ..., l, Ev|1)
        top = torch.where(l > 0, m, -torch.inf).amax(dim=0)  # M over the non-empty splits
        top = torch.where(torch.isneginf(top), 0.0, top)
        w = torch.where(l > 0, l * torch.exp(m - top), 0.0)  # (n, ..., l, 1)
        total = w.sum(dim=0)
        return (w * o).sum(dim=0) / torch.where(total > 0, total, 1.0)  # (..., l, Ev)


SDPA = SplitKV()
