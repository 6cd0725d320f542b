"""Attention spelled in index notation: every contraction is an einsum, every mask a where.

``'...qd,...kd->...qk'`` is Q Kᵀ without a transpose, ``'...qk,...kv->...qv'`` is weights @ V
and ``'...qk->...q'`` the row sums; ``...`` broadcasts the leading dims. Grouped-query heads
are an extra index: query heads are split as (H_kv, g) and ``'...hgqd,...hkd->...hgqk'`` lets
each key/value head h serve its g query heads without copying it. Half precision is computed in
float32 (as real kernels accumulate) and the results are cast back.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="einsum",
    title="Scores, row sums and outputs as einsum contractions, masks with where",
    technique="einsum for QKᵀ, the softmax normaliser and the weighted sum of values; grouped "
    "heads as an extra einsum index; masking and empty rows with where",
    why_correct="each einsum is the same sum over d, over keys or over values that the matrix "
    "products compute, and where sets forbidden scores to -inf and empty rows to 0",
)


class EinsumNumpy:
    """The lesson contract on NumPy arrays, in index notation."""

    def causal_mask(self, T):
        i = np.arange(T)
        return np.einsum("q,k->qk", i, np.ones(T, dtype=int)) >= i  # (T, T): query i >= key j

    def softmax(self, x):
        x = np.asarray(x)
        work = np.promote_types(x.dtype, np.float32)
        return self._softmax(x.astype(work)).astype(x.dtype)

    @staticmethod
    def _softmax(scores):
        top = np.max(scores, axis=-1)  # (...,)
        top = np.where(np.isneginf(top), 0.0, top)  # an empty row: shift by 0
        e = np.exp(scores - top[..., None])  # (..., k), 0 at -inf
        total = np.einsum("...k->...", e)  # (...,) row sums
        return e / np.where(total > 0, total, 1.0)[..., None]  # an empty row stays 0

    def attention(self, Q, K, V, mask=None):
        dtype = np.result_type(Q, K, V)
        work = np.promote_types(dtype, np.float32)
        Q, K, V = Q.astype(work), K.astype(work), V.astype(work)
        scores = np.einsum("...qd,...kd->...qk", Q, K) * (1 / math.sqrt(Q.shape[-1]))
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # (..., T_q, T_k)
        weights = self._softmax(scores)
        out = np.einsum("...qk,...kv->...qv", weights, V)  # (..., T_q, d_v)
        return out.astype(dtype), weights.astype(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        dtype = np.result_type(X, W_q, W_k, W_v)
        work = np.promote_types(dtype, np.float32)
        X = X.astype(work)
        Q, K, V = (np.einsum("...td,de->...te", X, W.astype(work)) for W in (W_q, W_k, W_v))
        out, weights = self.attention(Q, K, V, self.causal_mask(X.shape[-2]))
        return out.astype(dtype), weights.astype(dtype)


def _work(*tensors):
    """The dtype to compute in: the inputs' common dtype, float32 at least."""
    dtype = torch.float32
    for t in tensors:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def _softmax(scores):
    """Softmax over the last index; -inf entries get 0 and a row of them stays 0."""
    top = scores.detach().amax(dim=-1)  # (...,): a shift, it carries no gradient
    top = torch.where(torch.isneginf(top), 0.0, top)  # an empty row: shift by 0
    e = torch.exp(scores - top[..., None])  # (..., k), 0 at -inf
    total = torch.einsum("...k->...", e)  # (...,) row sums
    return e / torch.where(total > 0, total, 1.0)[..., None]  # an empty row stays 0


class EinsumTorch:
    """The lesson contract on torch tensors, in index notation."""

    def causal_mask(self, T):
        i = torch.arange(T)
        return torch.einsum("q,k->qk", i, torch.ones_like(i)) >= i  # (T, T): query i >= key j

    def softmax(self, x):
        return _softmax(x.to(_work(x))).to(x.dtype)

    def attention(self, Q, K, V, mask=None):
        dtype = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
        work = _work(Q, K, V)
        Q, K, V = Q.to(work), K.to(work), V.to(work)
        scores = torch.einsum("...qd,...kd->...qk", Q, K) * (1 / math.sqrt(Q.shape[-1]))
        if mask is not None:
            scores = torch.where(mask, scores, -math.inf)  # (..., T_q, T_k)
        weights = _softmax(scores)
        out = torch.einsum("...qk,...kv->...qv", weights, V)  # (..., T_q, d_v)
        return out.to(dtype), weights.to(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        work = _work(X, W_q, W_k, W_v)
        x = X.to(work)
        Q, K, V = (torch.einsum("...td,de->...te", x, W.to(work)) for W in (W_q, W_k, W_v))
        out, weights = self.attention(Q, K, V, self.causal_mask(X.shape[-2]).to(X.device))
        return out.to(X.dtype), weights.to(X.dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention in einsum form; query heads grouped as (H_kv, g)."""
    if query.dim() < 3:  # unbatched (L, E): one head of its own, removed again at the end
        return scaled_dot_product_attention(query[None], key[None], value[None], attn_mask,
                                            dropout_p, is_causal, scale, enable_gqa)[0]
    dtype, work = query.dtype, _work(query, key, value)
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    H, H_kv = query.shape[-3], key.shape[-3]
    g = H // H_kv if enable_gqa else 1  # query heads per key/value head
    q = query.to(work).unflatten(-3, (H // g, g))  # (N, ..., H_kv, g, L, E)
    k, v = key.to(work), value.to(work)  # (N, ..., H_kv, S, E), (N, ..., H_kv, S, Ev)
    factor = 1 / math.sqrt(E) if scale is None else scale
    scores = torch.einsum("...hgqd,...hkd->...hgqk", q, k) * factor  # (N, ..., H_kv, g, L, S)

    def grouped(m):  # a mask broadcastable to (N, ..., H, L, S), as (N, ..., H_kv, g, L, S)
        full = np.broadcast_shapes(m.shape, query.shape[:-1] + (S,))
        return m.expand(full).unflatten(-3, (H // g, g))

    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = torch.where(grouped(attn_mask), scores, -math.inf)  # True = may attend
    elif attn_mask is not None:
        scores = scores + grouped(attn_mask.to(work))  # a float mask is added
    if is_causal:  # top-left: query i sees keys 0 .. i
        i, j = torch.arange(L, device=query.device), torch.arange(S, device=query.device)
        scores = torch.where(j[None, :] <= i[:, None], scores, -math.inf)
    weights = _softmax(scores)
    if dropout_p > 0:
        weights = torch.nn.functional.dropout(weights, dropout_p)  # survivors scaled 1/(1-p)
    out = torch.einsum("...hgqk,...hkv->...hgqv", weights, v)  # (N, ..., H_kv, g, L, Ev)
    return out.flatten(-4, -3).to(dtype)  # (N, ..., H, L, Ev)


NUMPY = EinsumNumpy()
TORCH = EinsumTorch()
SDPA = scaled_dot_product_attention
