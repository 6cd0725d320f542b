"""A kernel's loop structure in torch: query chunks of 64, key tiles of 64, head-dim blocks of 128.

What FlashAttention-style kernels do, step by step and one overridable method per step, so the
entries that break one step (``zoo/online_softmax_*``, ``zoo/key_tail_tile_dropped`` …) diff
against this correct kernel. Each chunk of queries streams the key tiles with a running max m,
a running sum l and an accumulator acc, rescaled by exp(m_old − m_new) when a tile raises the
max; a row that has seen no allowed key yet is shifted by 0, so a fully masked tile (left
padding of 64 or 128 keys) leaves l = acc = 0 instead of NaN. Partial tiles at the end of the
keys and of the queries are handled like full ones. Scores are summed over blocks of 128 head
features, scaled before the product, and half precision accumulates in float32.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="tiled-kernel",
    title="Query chunks × key tiles with online softmax, the loop nest of a fused kernel",
    technique="queries in chunks of 64 with causal blocks at absolute positions, keys in tiles of "
    "64 with a running max, sum and rescaled accumulator, head dims in blocks of 128, GQA by index",
    why_correct="each tile rescales l and acc to the current max, so acc / l is softmax(s)·v; "
    "a row with no allowed key yet is shifted by 0, so masked tiles add exactly 0",
)


def spans(n, size):
    """[(start, stop)] covering range(n) in blocks of ``size``, the last one partial."""
    return [(a, min(a + size, n)) for a in range(0, n, size)]


class TiledSDPA:
    """F.scaled_dot_product_attention's signature on a chunk × tile loop nest."""

    def __init__(self, q_chunk=64, k_tile=64, d_block=128):
        self.q_chunk, self.k_tile, self.d_block = q_chunk, k_tile, d_block

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L, S = query.shape[-2], key.shape[-2]
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
        if enable_gqa:
            key, value = self.kv_for_query_heads(query, key, value)  # (..., H_q, S, E|Ev)
        work = torch.promote_types(query.dtype, torch.float32)  # half accumulates in float32
        q, k, v = query.to(work), key.to(work), value.to(work)
        mask = bias = None
        if attn_mask is not None:
            attn_mask = self.align_mask(attn_mask, query)
            full = attn_mask.expand(np.broadcast_shapes(attn_mask.shape, (L, S)))  # (.., L, S)
            mask, bias = (full, None) if full.dtype == torch.bool else (None, full.to(work))
        chunks = [self.attend_chunk(q, k, v, mask, bias, factor, is_causal, rows, dropout_p)
                  for rows in self.query_chunks(L)]
        return torch.cat(chunks, dim=-2).to(query.dtype)  # (..., L, Ev)

    # -- the steps ---------------------------------------------------------------------------

    def kv_for_query_heads(self, query, key, value):
        """Query head h reads key/value head h // g, g = H_q / H_kv."""
        group = query.shape[-3] // key.shape[-3]
        heads = torch.arange(query.shape[-3], device=query.device) // group  # (H_q,)
        return key.index_select(-3, heads), value.index_select(-3, heads)

    def align_mask(self, attn_mask, query):
        """Right-align the mask's axes with the scores': (H, L, S) under (N, H, L, E) is per
        head."""
        missing = query.dim() - attn_mask.dim()
        return attn_mask.reshape((1,) * max(missing, 0) + tuple(attn_mask.shape))

    def query_chunks(self, L):
        return spans(L, self.q_chunk)

    def key_tiles(self, S):
        return spans(S, self.k_tile)

    def causal_block(self, rows, cols, device):
        """(rows, cols) bool of a causal block at absolute positions: key j <= query i."""
        (a, b), (c, d) = rows, cols
        keys, queries = torch.arange(c, d, device=device), torch.arange(a, b, device=device)
        return keys[None, :] <= queries[:, None]

    def scores(self, q, k, factor):
        """(..., l, t) = Σ over head-dim blocks of (factor · q_blk) k_blkᵀ."""
        s, n = 0, self.d_block
        for f in range(0, q.shape[-1], n):
            s = s + (q[..., f:f + n] * factor) @ k[..., f:f + n].transpose(-2, -1)
        return s

    def tile_scores(self, q, k, mask, bias, factor, causal, rows, cols):
        """The scores of one chunk × tile block, −∞ where the key is forbidden."""
        (a, b), (c, d) = rows, cols
        s = self.scores(q[..., a:b, :], k[..., c:d, :], factor)  # (..., b - a, d - c)
        if bias is not None:
            s = s + bias[..., a:b, c:d]
        keep = None if mask is None else mask[..., a:b, c:d]
        if causal:
            block = self.causal_block(rows, cols, q.device)
            keep = block if keep is None else keep & block
        return s if keep is None else s.masked_fill(~keep, -math.inf)

    def attend_chunk(self, q, k, v, mask, bias, factor, causal, rows, dropout_p):
        m = l = acc = None
        for cols in self.key_tiles(k.shape[-2]):
            s = self.tile_scores(q, k, mask, bias, factor, causal, rows, cols)
            m, l, acc = self.update(m, l, acc, s, v[..., cols[0]:cols[1], :], dropout_p)
        return self.finish(l, acc)

    def update(self, m, l, acc, s, v, dropout_p):
        """One tile of online softmax: the new max, the rescaled sum and accumulator."""
        top = s.detach().amax(dim=-1, keepdim=True)  # (..., l, 1), a shift: no gradient
        m_new = top if m is None else torch.maximum(m, top)
        shift = torch.where(torch.isneginf(m_new), 0.0, m_new)  # nothing allowed yet: shift by 0
        p = torch.exp(s - shift)  # (..., l, t), 0 where forbidden
        kept = torch.nn.functional.dropout(p, dropout_p) if dropout_p > 0 else p
        if m is None:
            return m_new, p.sum(dim=-1, keepdim=True), kept @ v
        alpha = torch.exp(m - shift)  # rescales to the new max; 0 while m = -∞ (shift never is)
        return m_new, alpha * l + p.sum(dim=-1, keepdim=True), alpha * acc + kept @ v

    def finish(self, l, acc):
        """acc / l, and 0 for a row that saw no allowed key (acc is 0 there)."""
        return acc / torch.where(l > 0, l, 1.0)  # (..., l, Ev)


SDPA = TiledSDPA()
