"""Everything in float64 inside, whatever comes in; the caller's dtype going out.

The blunt way to make low precision a non-issue: cast the inputs to float64, compute, and cast
the results back to the input dtype. Scores of float16 inputs cannot overflow, the sums lose
nothing, and the only rounding at low precision is the final cast, so the error is below the
reference's own. The output dtype still follows the input (C6), and the torch casts are
differentiable, so gradients reach the caller's tensors in their own dtype.

The softmax is written with masks of the finite entries instead of a max-subtraction guard:
in NumPy through the ufuncs' ``where=`` argument (an all −∞ row is never touched and stays 0),
in torch with ``nan_to_num`` for the shift and ``total + (total == 0)`` as the denominator.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="float64-inside",
    title="Cast to float64, compute, cast back to the input dtype",
    technique="all arithmetic in float64 regardless of the input dtype; results cast back",
    why_correct="float64 attention is exact to ~1e-16, so after the cast the only error is one "
    "rounding to the input dtype, and the cast back keeps the output dtype equal to the input's",
)


class Float64Numpy:
    """The lesson contract on NumPy arrays, computed in float64."""

    def causal_mask(self, T):
        return np.tri(T, dtype=bool)  # (T, T): ones on and below the diagonal

    def softmax(self, x):
        x = np.asarray(x)
        return self._softmax64(x.astype(np.float64)).astype(x.dtype)

    @staticmethod
    def _softmax64(x):
        """Softmax over the last axis of a float64 array; -inf entries and empty rows give 0."""
        finite = ~np.isneginf(x)  # (..., n) entries that take part
        m = np.max(x, axis=-1, keepdims=True, where=finite, initial=-np.inf)  # (..., 1)
        shifted = np.subtract(x, m, out=np.full_like(x, -np.inf), where=finite)  # never -inf+inf
        e = np.exp(shifted)  # (..., n), exactly 0 where the entry was -inf
        total = e.sum(axis=-1, keepdims=True)  # (..., 1): 0 only for an empty row
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)

    def attention(self, Q, K, V, mask=None):
        dtype = np.result_type(Q, K, V)
        q, k, v = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
        scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = self._softmax64(scores)
        return (weights @ v).astype(dtype), weights.astype(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        dtype = np.result_type(X, W_q, W_k, W_v)
        x, w_q, w_k, w_v = (np.asarray(a, dtype=np.float64) for a in (X, W_q, W_k, W_v))
        out, weights = self.attention(x @ w_q, x @ w_k, x @ w_v, self.causal_mask(x.shape[-2]))
        return out.astype(dtype), weights.astype(dtype)


def _softmax64(x):
    """Softmax over the last axis of a float64 tensor; -inf entries and empty rows give 0."""
    m = x.detach().amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)  # a shift; empty row: 0
    e = torch.exp(x - m)  # (..., n), exactly 0 at -inf
    total = e.sum(dim=-1, keepdim=True)  # 0 for an empty row, else >= 1 (the max gives exp 0)
    return e / (total + (total == 0))  # an empty row divides 0 by 1


def _dtype(*tensors):
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


class Float64Torch:
    """The lesson contract on torch tensors, computed in float64."""

    def causal_mask(self, T):
        return torch.ones(T, T).tril().to(torch.bool)  # (T, T): ones on and below the diagonal

    def softmax(self, x):
        return _softmax64(x.to(torch.float64)).to(x.dtype)

    def attention(self, Q, K, V, mask=None):
        dtype = _dtype(Q, K, V)
        q, k, v = (t.to(torch.float64) for t in (Q, K, V))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
        if mask is not None:
            scores = torch.where(mask, scores, -math.inf)
        weights = _softmax64(scores)
        return (weights @ v).to(dtype), weights.to(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        dtype = _dtype(X, W_q, W_k, W_v)
        x, w_q, w_k, w_v = (t.to(torch.float64) for t in (X, W_q, W_k, W_v))
        mask = self.causal_mask(x.shape[-2]).to(x.device)
        out, weights = self.attention(x @ w_q, x @ w_k, x @ w_v, mask)
        return out.to(dtype), weights.to(dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention computed in float64; returns the query's dtype."""
    dtype = query.dtype
    q, k, v = (t.to(torch.float64) for t in (query, key, value))
    L, S = q.shape[-2], k.shape[-2]
    if enable_gqa:  # query head h reads key/value head h // g, g = H_q / H_kv
        heads = torch.arange(q.shape[-3], device=q.device) // (q.shape[-3] // k.shape[-3])
        k, v = k[..., heads, :, :], v[..., heads, :, :]
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * factor  # (N, ..., H, L, S)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        scores = scores + attn_mask.to(torch.float64)  # a float mask is added
    elif attn_mask is not None:
        scores = torch.where(attn_mask, scores, -math.inf)  # True = may attend
    if is_causal:  # top-left: query i sees keys 0 .. i
        causal = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
        scores = torch.where(causal, scores, -math.inf)
    weights = _softmax64(scores)
    if dropout_p > 0:
        weights = torch.nn.functional.dropout(weights, dropout_p)  # survivors scaled 1/(1-p)
    return (weights @ v).to(dtype)


NUMPY = Float64Numpy()
TORCH = Float64Torch()
SDPA = scaled_dot_product_attention
