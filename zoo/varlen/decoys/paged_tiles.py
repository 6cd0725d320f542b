"""A tiled online-softmax kernel over pages: flash-decoding's loop, written in torch.

The kernel a paged-attention implementation is: for each sequence and each tile of
``BLOCK_M`` queries, walk the key tiles (one page of the cache, or ``BLOCK_N`` packed keys),
keep a running maximum, normaliser and accumulator per row, rescale them as the maximum grows,
and divide once at the end. Query heads that share a key/value head are computed together, as
GQA kernels pack them. Sequences are launched last to first, as a grid may run them.
"""

import math

import torch

from zoo import Decoy

DECOY = Decoy(
    id="varlen-paged-tiles",
    title="Online softmax over tiles of pages, query heads grouped per key/value head",
    technique="per sequence and tile of 16 queries, a loop over key tiles (pages of the "
    "cache, or 16 packed keys) with a running max, normaliser and rescaled accumulator",
    why_correct="the running max and normaliser are rescaled exactly as the maximum grows, "
    "a row that has seen no key is shifted by 0 and divided by nothing, and stores are cut "
    "at the sequence's last row",
)

BLOCK_M, BLOCK_N = 16, 16


class PagedTiles:
    def __call__(self, q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
        q, k, v = self.operands(q, k, v)
        total_q, Hq, D = q.shape
        Hk, Dv = v.shape[-2:]
        g = Hq // Hk
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        scale = softmax_scale if softmax_scale is not None else D ** -0.5
        out = torch.zeros(total_q + BLOCK_M, Hq, Dv, dtype=work)  # room for a whole last tile
        lse = torch.full((Hq, total_q + BLOCK_M), -math.inf, dtype=work)
        B = len(cu_seqlens_q) - 1
        for b in reversed(range(B)):
            q0, sq = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1] - cu_seqlens_q[b])
            if block_table is None:
                k0 = int(cu_seqlens_k[b])
                sk = int(seqused_k[b]) if seqused_k is not None else int(cu_seqlens_k[b + 1]) - k0
                size = BLOCK_N
            else:
                k0, sk, size = 0, int(seqused_k[b]), k.shape[1]
            slopes = None
            if alibi_slopes is not None:
                slopes = (alibi_slopes[b] if alibi_slopes.dim() == 2 else alibi_slopes)
                slopes = slopes.to(work).view(Hk, g, 1, 1)
            for m0 in range(0, sq, BLOCK_M):
                end = q0 + m0 + self.tile_rows(sq, m0)
                qt = q[q0 + m0:end].to(work) * scale  # (rows, Hq, D)
                rows = qt.shape[0]
                qt = qt.permute(1, 0, 2).reshape(Hk, g, rows, D)  # heads grouped per kv head
                d = (torch.arange(rows) + m0 + sk - sq)[:, None]  # (rows, 1) diagonals
                m = torch.full((Hk, g, rows, 1), -math.inf, dtype=work)
                l = torch.zeros(Hk, g, rows, 1, dtype=work)
                acc = torch.zeros(Hk, g, rows, Dv, dtype=work)
                for t in range(-(-sk // size)):
                    kt, vt, pos = self.tile(k, v, block_table, b, k0, t, size)
                    unused = ~(pos < sk)[:, None, None]  # a masked load: padding reads as 0
                    kt, vt = kt.masked_fill(unused, 0), vt.masked_fill(unused, 0)
                    s = torch.einsum("hgmd,nhd->hgmn", qt, kt.to(work))  # (Hk, g, rows, n)
                    s = self.score_mod(s, softcap, slopes, d, pos)
                    keep = (pos < sk)[None, :] & self.visible(d, pos, causal, window_size)
                    s = s.masked_fill(~keep, self.fill)
                    m, l, acc = self.update(m, l, acc, s, vt.to(work).permute(1, 0, 2))
                o = acc / torch.where(l > 0, l, torch.ones_like(l))
                lse_t = torch.where(l > 0, m + torch.log(l), torch.full_like(l, -math.inf))
                self.store(out, lse, q0 + m0, rows, o.reshape(Hq, rows, Dv).transpose(0, 1),
                           lse_t.reshape(Hq, rows))
        out = out[:total_q].to(q.dtype)
        return (out, lse[:, :total_q]) if return_lse else out

    fill = -math.inf

    def operands(self, q, k, v):
        """q, k and v as the kernel reads them: each through its own strides and storage
        offset, as a launcher passes them (a pointer and the strides)."""
        return q, k, v

    def tile_rows(self, sq, m0):
        """How many queries the tile starting at m0 holds: cut at the sequence's end."""
        return min(BLOCK_M, sq - m0)

    def tile(self, k, v, block_table, b, k0, t, size):
        """Key tile t: its keys, values and logical positions (n,)."""
        pos = t * size + torch.arange(size)
        if block_table is None:
            idx = (k0 + pos).clamp_max(k.shape[0] - 1)  # past the end: masked below
            return k[idx], v[idx], pos
        page = int(block_table[b, t])
        return k[page], v[page], self.positions(page, t, size)

    def positions(self, page, t, size):
        """The logical key positions held by page ``page``, the t-th of its sequence."""
        return t * size + torch.arange(size)

    def visible(self, d, pos, causal, window_size):
        wl, wr = window_size
        keep = torch.ones(d.shape[0], pos.shape[0], dtype=torch.bool)
        if causal:
            keep &= pos[None, :] <= d
        if wl >= 0:
            keep &= pos[None, :] >= d - wl
        if wr >= 0:
            keep &= pos[None, :] <= d + wr
        return keep

    def tanh(self, x):
        return torch.tanh(x)

    def score_mod(self, s, softcap, slopes, d, pos):
        if softcap > 0:
            s = softcap * self.tanh(s / softcap)
        if slopes is not None:
            s = s - slopes * (d - pos[None, :]).abs()
        return s

    def update(self, m, l, acc, s, vt):
        """One step of the online softmax; vt (Hk, n, Dv)."""
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - shift)  # (Hk, g, rows, n)
        alpha = torch.exp(m - shift)  # 0 while the row has seen nothing
        return m_new, l * alpha + p.sum(-1, keepdim=True), acc * alpha + p @ vt[:, None]

    def store(self, out, lse, start, rows, o, l):
        out[start:start + rows] = o
        lse[:, start:start + rows] = l


VARLEN = PagedTiles()
