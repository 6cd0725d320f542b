"""The rescale exp(m_old − m_new) computed unguarded: NaN after two fully masked key tiles.

A row whose first tiles are entirely masked (left padding of 128 keys and more, a padded
batch item, a fully masked row of a long sequence) keeps m = −∞ through them. The correct
kernel shifts such a row by 0, so every factor is exp(−∞) = 0. Computing the rescale as
exp(m_old − m_new) gives exp(−∞ − (−∞)) = NaN at the second masked tile, and the NaN stays in
l and acc whatever comes after. One tile, or a masked first tile followed by allowed keys, is
fine — which is all the quick battery has.
"""

import torch

from zoo import Bug
from zoo.decoys.tiled_kernel import TiledSDPA

BUG = Bug(
    id="online-softmax-nan-after-masked-tiles",
    title="Online-softmax rescale is NaN once two leading key tiles are fully masked",
    category="masking",
    symptom="nan",
    lesson="Guard every exp of a difference of running maxima: while the max is −∞, shift by 0.",
    source="",
    seen_in="FlashAttention-style kernels under left padding or block-sparse masks, where a "
            "fully masked key block makes the running max −∞ (NaN reports against fused "
            "attention backends for fully masked blocks and rows)",
    caught_by=("matches_loop_oracle", "empty_rows_are_zero"),
    depth="standard",
)


class Sdpa(TiledSDPA):
    def update(self, m, l, acc, s, v, dropout_p):
        top = s.detach().amax(dim=-1, keepdim=True)  # (..., l, 1), a shift: no gradient
        m_new = top if m is None else torch.maximum(m, top)
        shift = torch.where(torch.isneginf(m_new), 0.0, m_new)  # nothing allowed yet: shift by 0
        p = torch.exp(s - shift)  # (..., l, t), 0 where forbidden
        kept = torch.nn.functional.dropout(p, dropout_p) if dropout_p > 0 else p
        if m is None:
            return m_new, p.sum(dim=-1, keepdim=True), kept @ v
        alpha = torch.exp(m - m_new)  # BUG: exp(-inf - (-inf)) = NaN while the row saw no key
        return m_new, alpha * l + p.sum(dim=-1, keepdim=True), alpha * acc + kept @ v


SDPA = Sdpa()
