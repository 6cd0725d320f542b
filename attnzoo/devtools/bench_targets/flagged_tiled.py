"""The bench's flagged target: a tiled SDPA kernel whose running sum misses its rescale.

``attnzoo bench --flagged`` times ``attnzoo check`` on this file against torch's own SDPA at
the same depth, to show what a flagged target costs beyond a clean one of the same size. For
the comparison to be about the flag and nothing else, the target is torch's SDPA signature on
the correct tiled kernel of ``zoo/decoys/tiled_kernel.py`` (query chunks of 64, key tiles of
64, online softmax), with one defect: when a new key tile raises a row's maximum, the running
sum l is not multiplied by exp(m_old − m_new), while the accumulator is. The earlier tiles'
share of the normaliser stays at the old, larger scale, so the output is too small. Within one
tile there is nothing to rescale and the kernel is exact: the defect shows only on keys past
the first 64, which the quick battery never has, so detectors fail on some cases and pass on
others — the work a flagged detector does to learn each case's outcome is what is timed.

Kept here, with the bench, rather than in the zoo: it is a fixed load for the benchmark, and
its verdicts are not part of the kill matrix.
"""

import torch

from zoo.decoys.tiled_kernel import TiledSDPA


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
        # the defect: the running sum keeps the old max's scale (alpha * l is correct)
        return m_new, l + p.sum(dim=-1, keepdim=True), alpha * acc + kept @ v


SDPA = Sdpa()
