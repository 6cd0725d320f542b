"""Online softmax that rescales the running sum but not the output accumulator.

When a later key tile raises a row's maximum, both running quantities were computed against
the old maximum and both must be multiplied by exp(m_old − m_new). Forgetting the accumulator
leaves the earlier tiles' values weighted too heavily against the later ones. With one tile —
every key of the quick battery fits in one — there is nothing to rescale, and the kernel is exact.
"""

import torch

from zoo import Bug
from zoo.decoys.tiled_kernel import TiledSDPA

BUG = Bug(
    id="online-softmax-accumulator-not-rescaled",
    title="Tiled online softmax rescales l but not acc when the running max grows",
    category="softmax",
    symptom="silent",
    lesson="In online softmax every running quantity — the sum and the accumulator — is rescaled "
           "by exp(m_old − m_new) whenever the maximum changes.",
    source="",
    seen_in="hand-written FlashAttention forward passes (Triton and CUDA tutorial rewrites) "
            "that update l_i = alpha·l_i + rowsum(p) but accumulate acc += p @ v",
    caught_by=("matches_loop_oracle",),
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
        alpha = torch.exp(m - shift)  # rescales to the new max; 0 while m = -∞ (shift never is)
        # BUG: the accumulator keeps the old max's scale
        return m_new, alpha * l + p.sum(dim=-1, keepdim=True), acc + kept @ v


SDPA = Sdpa()
