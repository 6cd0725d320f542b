"""A kernel with a hand-written backward: flash-attention's recomputation, as a
``torch.autograd.Function``.

The forward keeps only the output and the LSE of every row. The backward recomputes each
sequence's probabilities from the scores and the saved LSE, ``P = exp(S − lse)``, then
``dV = Pᵀ·dO``, ``dS = P ∘ (dO·Vᵀ − rowsum(dO ∘ O))``, through the cap's derivative
``1 − tanh²``, and ``dQ = scale·dS·K``, ``dK = scale·dSᵀ·Q``; gradients of query heads that share
a key/value head, and of pages that sequences share, are summed into the cache they came from.
"""

import math

import torch

from zoo import Decoy

DECOY = Decoy(
    id="varlen-recomputing-backward",
    title="An autograd.Function whose backward recomputes P from the saved LSE, per sequence",
    technique="forward without a graph, saving out and the LSE; backward recomputes the masked "
    "scores per sequence and applies the softmax, cap and matmul derivatives by hand, adding the "
    "key/value gradients back into the packed rows or the (block, slot) they were read from",
    why_correct="P = exp(S - lse) is the forward's softmax exactly; the chain rule is applied "
    "term by term (dS = P(dP - rowsum(dO O)), times 1 - tanh^2 under a cap, the bias is a "
    "constant), and index_add sums every gradient into the one place its key came from",
)


class RecomputingBackward:
    def __call__(self, q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
        D = q.shape[-1]
        meta = dict(cu_q=[int(x) for x in cu_seqlens_q], cu_k=cu_seqlens_k, used=seqused_k,
                    table=block_table, scale=softmax_scale if softmax_scale is not None
                    else D ** -0.5, causal=causal, window=tuple(window_size), cap=softcap,
                    slopes=alibi_slopes, kernel=self)
        out, lse = Attention.apply(q, k, v, meta)
        return (out, lse) if return_lse else out

    def sequences(self, k, meta):
        """Per sequence: (b, query rows, flat indices of its keys in k.flatten(0, -3))."""
        cu_q, table = meta["cu_q"], meta["table"]
        for b in range(len(cu_q) - 1):
            if table is None:
                start = int(meta["cu_k"][b])
                sk = int(meta["cu_k"][b + 1]) - start if meta["used"] is None \
                    else int(meta["used"][b])
                idx = start + torch.arange(sk)
            else:
                sk, size = int(meta["used"][b]), k.shape[1]
                p = torch.arange(sk)
                idx = table[b].long()[p // size] * size + p % size  # (block, slot) flattened
            yield b, slice(cu_q[b], cu_q[b + 1]), idx

    def scores(self, qb, kb, b, meta):
        """(raw scaled scores z, masked scores s, tanh(z / cap) or None); heads first."""
        sq, sk = qb.shape[1], kb.shape[1]
        z = (qb @ kb.transpose(-2, -1)) * meta["scale"]  # (Hq, sq, sk)
        t = torch.tanh(z / meta["cap"]) if meta["cap"] > 0 else None
        s = meta["cap"] * t if t is not None else z
        d = torch.arange(sq)[:, None] + sk - sq
        j = torch.arange(sk)[None, :]
        if meta["slopes"] is not None:
            slopes = meta["slopes"][b] if meta["slopes"].dim() == 2 else meta["slopes"]
            s = s - slopes.to(s.dtype)[:, None, None] * (d - j).abs()
        wl, wr = meta["window"]
        keep = torch.ones(sq, sk, dtype=torch.bool)
        if meta["causal"]:
            keep &= j <= d
        if wl >= 0:
            keep &= j >= d - wl
        if wr >= 0:
            keep &= j <= d + wr
        return z, s.masked_fill(~keep, -math.inf), t

    def probabilities(self, s, lse):
        """The forward's softmax, recomputed from the masked scores and the saved LSE."""
        safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
        return torch.exp(s - safe[..., None])  # exactly 0 where hidden and on empty rows

    def recompute(self, qb, kb, b, meta, lse):
        """The backward's P and tanh(z / cap): the forward's masked scores, the saved LSE."""
        _, s, t = self.scores(qb, kb, b, meta)
        return self.probabilities(s, lse), t

    def through_cap(self, ds, t):
        """dS with respect to the raw scores: the cap's derivative is 1 - tanh²."""
        return ds if t is None else ds * (1 - t * t)


def heads_first(x, g):
    """(n, Hk, D) -> (Hq, n, D), each key/value head repeated for its g query heads."""
    return x.repeat_interleave(g, dim=1).transpose(0, 1)


class Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, meta):
        kernel = meta["kernel"]
        total_q, Hq, _ = q.shape
        Hk, Dv = v.shape[-2:]
        g = Hq // Hk
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        kf, vf = k.flatten(0, -3), v.flatten(0, -3)  # (keys, Hk, D|Dv), packed or paged
        out = torch.zeros(total_q, Hq, Dv, dtype=work)
        lse = torch.full((Hq, total_q), -math.inf, dtype=work)
        for b, rows, idx in kernel.sequences(k, meta):
            if rows.stop == rows.start or len(idx) == 0:
                continue
            qb = q[rows].to(work).transpose(0, 1)
            kb, vb = heads_first(kf[idx].to(work), g), heads_first(vf[idx].to(work), g)
            _, s, _ = kernel.scores(qb, kb, b, meta)
            l = torch.logsumexp(s, dim=-1)  # (Hq, sq), -inf on a row that sees nothing
            p = kernel.probabilities(s, l)
            out[rows] = (p @ vb).transpose(0, 1)
            lse[:, rows] = l
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.meta = meta
        ctx.mark_non_differentiable(lse)
        return out.to(q.dtype), lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        meta = ctx.meta
        kernel = meta["kernel"]
        Hq, Hk = q.shape[1], v.shape[-2]
        g = Hq // Hk
        work = out.dtype
        kf, vf = k.flatten(0, -3), v.flatten(0, -3)
        dq = torch.zeros(q.shape, dtype=work)
        dk = torch.zeros(kf.shape, dtype=work)
        dv = torch.zeros(vf.shape, dtype=work)
        for b, rows, idx in kernel.sequences(k, meta):
            sq, sk = rows.stop - rows.start, len(idx)
            if sq == 0 or sk == 0:
                continue
            qb = q[rows].to(work).transpose(0, 1)  # (Hq, sq, D)
            kb, vb = heads_first(kf[idx].to(work), g), heads_first(vf[idx].to(work), g)
            do = dout[rows].to(work).transpose(0, 1)  # (Hq, sq, Dv)
            o = out[rows].transpose(0, 1)
            p, t = kernel.recompute(qb, kb, b, meta, lse[:, rows])  # (Hq, sq, sk)
            dvb = p.transpose(-2, -1) @ do  # (Hq, sk, Dv)
            dp = do @ vb.transpose(-2, -1)
            ds = p * (dp - (do * o).sum(-1, keepdim=True))
            dz = kernel.through_cap(ds, t) * meta["scale"]
            dq[rows] = (dz @ kb).transpose(0, 1)
            dkb = dz.transpose(-2, -1) @ qb  # (Hq, sk, D)
            fold = lambda x: x.transpose(0, 1).unflatten(1, (Hk, g)).sum(2)  # noqa: E731
            dk.index_add_(0, idx, fold(dkb))
            dv.index_add_(0, idx, fold(dvb))
        return (dq.to(q.dtype), dk.view(k.shape).to(k.dtype), dv.view(v.shape).to(v.dtype),
                None)


VARLEN = RecomputingBackward()
