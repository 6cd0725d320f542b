"""Attention as nested Python loops: one query, one key, one number at a time.

Nothing is vectorised but a dot product, so the code reads like the formula written out by
hand: a score per (query, key), a softmax per row of scores, an output entry per (query, value
column). Broadcast leading dims are walked index by index, the way ``np.broadcast`` would pair
them. Forbidden keys are never scored at all, so whatever they hold cannot leak into a row.

The torch version loops over keys, one at a time, but each number it handles is a tensor over
the leading dims and the queries (the batch and every query's copy of that key's score), so
autograd, gradcheck and the harness' time limits stay cheap at a few hundred keys.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="plain-loops",
    title="Python loops over queries and keys, a dot product at a time",
    technique="explicit loops over leading indices, queries, keys and value columns; only the "
    "dot product is vectorised",
    why_correct="each weight is exp(score − row max) / Σ exp(score − row max) over the allowed "
    "keys of its row, exactly the definition, and a row with no allowed key stays 0",
)

NEG_INF = -math.inf


def _softmax_row(scores):
    """Weights for one row of scalars; a forbidden key scores -inf and gets exactly 0."""
    allowed = [s for s in scores if s != NEG_INF]
    if not allowed:
        return [0.0] * len(scores)  # no allowed key: zeros, never 0/0
    top = max(allowed)
    exps = [np.exp(s - top) if s != NEG_INF else 0.0 for s in scores]  # exp keeps the dtype
    total = sum(exps)  # >= 1: the maximum contributes exp(0)
    return [e / total for e in exps]


class LoopsNumpy:
    """The lesson contract on NumPy arrays, one scalar at a time."""

    def causal_mask(self, T):
        mask = np.zeros((T, T), dtype=bool)
        for i in range(T):
            for j in range(i + 1):  # keys 0 .. i
                mask[i, j] = True
        return mask

    def softmax(self, x):
        x = np.asarray(x)
        work = np.promote_types(x.dtype, np.float32)  # float16 accumulates in float32
        out = np.zeros(x.shape, dtype=work)
        for idx in np.ndindex(x.shape[:-1]):
            row = [work.type(s) for s in x[idx]]
            for j, w in enumerate(_softmax_row(row)):
                out[idx + (j,)] = w
        return out.astype(x.dtype)

    def attention(self, Q, K, V, mask=None):
        dtype = np.result_type(Q, K, V)
        out, weights = self._attend(Q, K, V, mask)
        return out.astype(dtype), weights.astype(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        dtype = np.result_type(X, W_q, W_k, W_v)
        Q, K, V = (self._project(X, W) for W in (W_q, W_k, W_v))  # (..., T, d) in float32+
        out, weights = self._attend(Q, K, V, self.causal_mask(X.shape[-2]))
        return out.astype(dtype), weights.astype(dtype)

    def _project(self, X, W):
        """X @ W, entry by entry: row t of X dotted with column c of W."""
        work = np.promote_types(np.result_type(X, W), np.float32)
        X, W = X.astype(work), W.astype(work)
        P = np.zeros(X.shape[:-1] + W.shape[-1:], dtype=work)  # (..., T, d)
        for idx in np.ndindex(X.shape[:-1]):
            for c in range(W.shape[-1]):
                P[idx + (c,)] = np.dot(X[idx], W[:, c])
        return P

    def _attend(self, Q, K, V, mask):
        """(out, weights) in the working dtype (float32 at least)."""
        work = np.promote_types(np.result_type(Q, K, V), np.float32)
        T_q, d_k = Q.shape[-2:]
        T_k, d_v = V.shape[-2:]
        mask_lead = () if mask is None else np.shape(mask)[:-2]
        scale = 1 / math.sqrt(d_k)  # a Python float: it keeps float32 float32

        # weights: one score per (query, key), one softmax per row, for every leading index
        lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], mask_lead)
        Q = np.broadcast_to(Q, lead + (T_q, d_k))  # (..., T_q, d_k), views: nothing is copied
        K = np.broadcast_to(K, lead + (T_k, d_k))  # (..., T_k, d_k)
        allowed = np.broadcast_to(True if mask is None else mask, lead + (T_q, T_k))
        weights = np.zeros(lead + (T_q, T_k), dtype=work)
        for b in np.ndindex(lead):
            q, k = Q[b].astype(work), K[b].astype(work)
            for i in range(T_q):
                scores = [
                    np.dot(q[i], k[j]) * scale if allowed[b + (i, j)] else work.type(NEG_INF)
                    for j in range(T_k)
                ]
                weights[b + (i,)] = _softmax_row(scores)  # (T_k,)

        # out: one weighted sum per (query, value column)
        lead = np.broadcast_shapes(lead, V.shape[:-2])
        W = np.broadcast_to(weights, lead + (T_q, T_k))  # (..., T_q, T_k)
        V = np.broadcast_to(V, lead + (T_k, d_v))  # (..., T_k, d_v)
        out = np.zeros(lead + (T_q, d_v), dtype=work)
        for b in np.ndindex(lead):
            w, v = W[b], V[b].astype(work)
            for i in range(T_q):
                for c in range(d_v):
                    out[b + (i, c)] = np.dot(w[i], v[:, c])  # Σ_j w_ij v_jc
        return out, weights


class LoopsTorch:
    """The lesson contract on torch tensors: loops over queries and keys, batched over the rest."""

    def causal_mask(self, T):
        rows = [[j <= i for j in range(T)] for i in range(T)]
        return torch.tensor(rows, dtype=torch.bool).reshape(T, T)

    def softmax(self, x):
        work = torch.promote_types(x.dtype, torch.float32)
        columns = [x[..., j].to(work) for j in range(x.shape[-1])]  # each (...)
        return torch.stack(self._softmax_row(columns), dim=-1).to(x.dtype)

    def attention(self, Q, K, V, mask=None):
        dtype = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
        out, weights = self._attend(Q, K, V, mask)
        return out.to(dtype), weights.to(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        work = torch.promote_types(X.dtype, torch.float32)
        Q, K, V = (self._project(X.to(work), W.to(work)) for W in (W_q, W_k, W_v))
        out, weights = self._attend(Q, K, V, self.causal_mask(X.shape[-2]).to(X.device))
        return out.to(X.dtype), weights.to(X.dtype)

    def _project(self, X, W):
        """X @ W, one output column at a time: column c is X dotted with W[:, c]."""
        return torch.stack([(X * W[:, c]).sum(-1) for c in range(W.shape[-1])], dim=-1)

    def _softmax_row(self, scores):
        """Weights for one row given as a list of per-key tensors (-inf = forbidden)."""
        top = scores[0]
        for s in scores[1:]:
            top = torch.maximum(top, s)
        top = top.detach()  # a shift, not a parameter: softmax does not depend on it
        top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)  # empty row: shift 0
        exps = [torch.exp(s - top) for s in scores]  # exactly 0 at -inf
        total = exps[0]
        for e in exps[1:]:
            total = total + e
        total = torch.where(total > 0, total, torch.ones_like(total))  # empty row: 0 / 1
        return [e / total for e in exps]

    def _attend(self, Q, K, V, mask):
        work = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
        work = torch.promote_types(work, torch.float32)  # half precision accumulates in float32
        Q, K, V = Q.to(work), K.to(work), V.to(work)
        T_q, d_k = Q.shape[-2:]
        T_k = K.shape[-2]
        scale = 1 / math.sqrt(d_k)
        if mask is None:
            mask = torch.ones(T_q, T_k, dtype=torch.bool, device=Q.device)
        mask = mask.expand(np.broadcast_shapes(mask.shape, (T_q, T_k)))  # (..., T_q, T_k)
        minus_inf = torch.tensor(NEG_INF, dtype=work, device=Q.device)
        scores = []  # one (..., T_q) column per key: that key's score for every query
        for j in range(T_k):
            s = (Q * K[..., j:j + 1, :]).sum(-1) * scale  # (..., T_q)
            scores.append(torch.where(mask[..., :, j], s, minus_inf))  # forbidden: -inf
        w = self._softmax_row(scores)  # per key, (..., T_q): each query's row normalised
        out = w[0][..., None] * V[..., 0:1, :]
        for j in range(1, T_k):
            out = out + w[j][..., None] * V[..., j:j + 1, :]  # (..., T_q, d_v) Σ_j w_j v_j
        return out, torch.stack(w, dim=-1)  # weights (..., T_q, T_k)


NUMPY = LoopsNumpy()
TORCH = LoopsTorch()
