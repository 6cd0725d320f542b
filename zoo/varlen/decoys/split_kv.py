"""A split-KV kernel: each sequence's keys cut into chunks, each chunk attended alone, the
partial outputs merged by their log-sum-exps — flash-decoding's second pass.

Every split returns a normalised partial output and its LSE; the merge weighs each split by
``exp(lse_split − lse)`` with ``lse = logsumexp`` over the splits. A split that sees no key has
LSE −inf and weight 0; a row that sees none in any split stays 0 with LSE −inf.
"""

import math

import torch

from zoo import Decoy

DECOY = Decoy(
    id="varlen-split-kv",
    title="Keys split in three chunks per sequence, partial outputs merged by their LSEs",
    technique="per sequence, three key chunks each give a normalised output and a natural-log "
    "LSE; the merge takes logsumexp over the chunks and weighs each by exp(lse_c - lse)",
    why_correct="softmax over a union of key sets is the LSE-weighted mixture of the softmaxes "
    "over the parts; empty chunks have weight exactly 0 and the split bounds are the "
    "sequence's own key count",
)

SPLITS = 3


class SplitKV:
    def __call__(self, q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
        total_q, Hq, D = q.shape
        Hk, Dv = v.shape[-2:]
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        scale = softmax_scale if softmax_scale is not None else 1 / math.sqrt(D)
        out = torch.zeros(total_q, Hq, Dv, dtype=work)
        lse = torch.full((Hq, total_q), -math.inf, dtype=work)
        for b in range(len(cu_seqlens_q) - 1):
            q0, q1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
            sq = q1 - q0
            kb, vb = self.allocated(k, v, b, cu_seqlens_k, block_table)  # (alloc, Hk, D|Dv)
            sk = self.used(b, seqused_k, kb.shape[0], max_seqlen_k)
            if sq == 0:
                continue
            kb = kb.to(work).repeat_interleave(Hq // Hk, dim=1)  # (alloc, Hq, D)
            vb = vb.to(work).repeat_interleave(Hq // Hk, dim=1)
            qb = q[q0:q1].to(work) * scale  # (sq, Hq, D)
            d = torch.arange(sq)[:, None] + sk - sq  # (sq, 1)
            slopes = None
            if alibi_slopes is not None:
                slopes = alibi_slopes[b] if alibi_slopes.dim() == 2 else alibi_slopes
            parts = []
            for lo, hi in self.bounds(sk, max_seqlen_k):
                j = torch.arange(lo, hi)
                s = torch.einsum("qhd,khd->hqk", qb, kb[lo:hi])  # (Hq, sq, n)
                s = self.cap(s, softcap)
                if slopes is not None:
                    s = s - slopes.to(work)[:, None, None] * (d - j[None, :]).abs()
                keep = j[None, :] < sk
                wl, wr = window_size
                if causal:
                    keep = keep & (j[None, :] <= d)
                if wl >= 0:
                    keep = keep & (j[None, :] >= d - wl)
                if wr >= 0:
                    keep = keep & (j[None, :] <= d + wr)
                s = s.masked_fill(~keep, -math.inf)
                parts.append(self.partial(s, vb[lo:hi].transpose(0, 1), softcap))
            o, l = self.merge(parts, Hq, sq, Dv, work)
            out[q0:q1] = o.transpose(0, 1)
            lse[:, q0:q1] = l
        out = out.to(q.dtype)
        return (out, lse) if return_lse else out

    def allocated(self, k, v, b, cu_seqlens_k, block_table):
        """Every key allocated to sequence b (used or not), in logical order."""
        if block_table is None:
            lo, hi = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
            return k[lo:hi], v[lo:hi]
        pages = block_table[b].long()
        return k[pages].flatten(0, 1), v[pages].flatten(0, 1)

    def used(self, b, seqused_k, allocated, max_seqlen_k):
        """How many keys sequence b uses: seqused_k when given, else all it was allocated."""
        return int(seqused_k[b]) if seqused_k is not None else allocated

    def cap(self, s, softcap):
        return softcap * torch.tanh(s / softcap) if softcap > 0 else s

    def bounds(self, sk, max_seqlen_k):
        """The key chunks [lo, hi) of a sequence with sk keys."""
        step = max(1, -(-sk // SPLITS))
        return [(lo, min(lo + step, sk)) for lo in range(0, sk, step)]

    def partial(self, s, v, softcap):
        """(normalised output, natural-log LSE) of one chunk; -inf LSE when it sees nothing."""
        m = s.amax(dim=-1, keepdim=True)
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
        p = torch.exp(s - m)
        total = p.sum(-1, keepdim=True)
        o = (p @ v) / torch.where(total > 0, total, torch.ones_like(total))
        return o, (m + torch.log(total)).squeeze(-1)

    def merge(self, parts, Hq, sq, Dv, work):
        if not parts:
            return torch.zeros(Hq, sq, Dv, dtype=work), torch.full((Hq, sq), -math.inf,
                                                                  dtype=work)
        lses = torch.stack([l for _, l in parts])  # (splits, Hq, sq)
        lse = torch.logsumexp(lses, dim=0)  # -inf when every split is empty
        safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
        w = torch.exp(lses - safe)  # (splits, Hq, sq), 0 for an empty split
        o = (w[..., None] * torch.stack([o for o, _ in parts])).sum(0)
        return o, lse


VARLEN = SplitKV()
