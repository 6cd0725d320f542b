"""A per-sequence loop: cut each sequence out, gather its keys, attend head by head.

How a first varlen implementation (and many a reference in a kernel's test file) is written:
a Python loop over the sequences of the batch and over the query heads, each a small dense
attention. It shares no code with ``reference/varlen.py``: pages are gathered one block at a
time, the mask is built from the query's diagonal row by row, and the softmax is written out.
"""

import math

import torch

from zoo import Decoy

DECOY = Decoy(
    id="varlen-sequence-loop",
    title="A loop over sequences and heads, each a dense attention over gathered keys",
    technique="per sequence: gather the keys page by page, then per query head a dense "
    "softmax over the visible keys, with the cap, the bias and the mask written as steps",
    why_correct="each sequence and head is computed alone from the clauses, so nothing of one "
    "sequence reaches another, and an empty row is left at 0 with LSE -inf",
)


class SequenceLoop:
    """attn_varlen as a loop; each step is a method a bug may get wrong."""

    def __call__(self, q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
        total_q, Hq, D = q.shape
        Hk, Dv = v.shape[-2:]
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(D)
        out = torch.zeros(total_q, Hq, Dv, dtype=work)
        lse = torch.full((Hq, total_q), -math.inf, dtype=work)
        cu_q = [int(x) for x in cu_seqlens_q]
        for b in range(len(cu_q) - 1):
            sq = cu_q[b + 1] - cu_q[b]
            kb, vb = self.keys(k, v, b, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table)
            sk = kb.shape[0]
            if sq == 0 or sk == 0:
                continue
            keep = self.visible(sq, sk, causal, window_size)  # (sq, sk)
            for h in range(Hq):
                g = self.kv_head(h, Hq, Hk)
                qh = q[cu_q[b]:cu_q[b + 1], h].to(work)  # (sq, D)
                s = (qh @ kb[:, g].to(work).T) * scale  # (sq, sk)
                s = self.scores(s, keep, softcap, self.bias(alibi_slopes, b, h, sq, sk, work))
                o, l = self.softmax_times(s, vb[:, g].to(work))
                out[cu_q[b]:cu_q[b + 1], h] = o
                lse[h, cu_q[b]:cu_q[b + 1]] = l
        out = out.to(q.dtype)
        return (out, lse) if return_lse else out

    def keys(self, k, v, b, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table):
        """Sequence b's used keys and values, (sk, Hk, D) and (sk, Hk, Dv)."""
        if block_table is None:
            start, end = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
            used = end - start if seqused_k is None else int(seqused_k[b])
            return k[start:start + used], v[start:start + used]
        used, size = int(seqused_k[b]), k.shape[1]
        pages = [int(p) for p in block_table[b, :-(-used // size)]] if used else []
        ks = [k[p] for p in pages] or [k[:0, 0]]
        vs = [v[p] for p in pages] or [v[:0, 0]]
        return torch.cat(ks)[:used], torch.cat(vs)[:used]

    def kv_head(self, h, Hq, Hk):
        return h // (Hq // Hk)

    def diagonal(self, sq, sk):
        """(sq, 1) the key each query is aligned with: the last query with the last key."""
        return torch.arange(sq)[:, None] + (sk - sq)

    def visible(self, sq, sk, causal, window_size):
        d, j = self.diagonal(sq, sk), torch.arange(sk)[None, :]
        wl, wr = window_size
        keep = torch.ones(sq, sk, dtype=torch.bool)
        if causal:
            keep &= j <= d
        if wl >= 0:
            keep &= j >= d - wl
        if wr >= 0:
            keep &= j <= d + wr
        return keep

    def bias(self, alibi_slopes, b, h, sq, sk, work):
        if alibi_slopes is None:
            return None
        slope = alibi_slopes[b, h] if alibi_slopes.dim() == 2 else alibi_slopes[h]
        return -slope.to(work) * (self.diagonal(sq, sk) - torch.arange(sk)[None, :]).abs()

    def scores(self, s, keep, softcap, bias):
        """Cap, then bias, then mask (V5, V6)."""
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        if bias is not None:
            s = s + bias
        return s.masked_fill(~keep, self.fill(s.dtype))

    def fill(self, dtype):
        """What a masked score becomes."""
        return -math.inf

    def softmax_times(self, s, v):
        m = s.max(dim=-1, keepdim=True).values
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(s - m)
        total = p.sum(dim=-1, keepdim=True)
        o = (p @ v) / total.clamp_min(torch.finfo(s.dtype).tiny)
        return o, (m + torch.log(total)).squeeze(-1)


VARLEN = SequenceLoop()
