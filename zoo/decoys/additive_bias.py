"""Masks as an additive bias: log(mask) is 0 where a key is kept and −∞ where it is not.

A bool mask becomes a float bias once, ``bias = log(mask)`` (log 1 = 0, log 0 = −∞), and from
then on masking is addition, the way a float ``attn_mask`` already is: causal, padding and
float masks simply add up. The fill is −∞, not a large finite number: −1e9 is still a score,
it spreads an empty row over forbidden keys and loses to any score above 1e9.

Two guards make the sum safe. A forbidden key's score may itself be huge (whatever it holds is
nobody's business), and +∞ − ∞ is NaN, so scores are first clamped to the finite range with
``nan_to_num``; only a forbidden key can tell the difference. The softmax's shift is the row
maximum raised to at least the most negative finite number, so an all −∞ row is shifted by a
finite amount, every exp(−∞) is 0, the row sums to 0 and is divided by 1, never 0/0.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="additive-bias",
    title="Masks turned into an additive bias log(mask) of 0 and −∞",
    technique="bool masks become bias = log(mask) ∈ {0, −∞} and are added to the scores; "
    "the softmax shift is max(row max, lowest finite) so an all −∞ row is 0",
    why_correct="adding −∞ makes exp exactly 0 for forbidden keys and 0 changes nothing for "
    "kept ones; clamped scores keep +∞ − ∞ out, and an all −∞ row sums to 0 and is left at 0",
)


class AdditiveNumpy:
    """The lesson contract on NumPy arrays with masks as additive biases."""

    def causal_mask(self, T):
        return np.triu(np.ones((T, T), dtype=bool), k=1).T | np.eye(T, dtype=bool)  # j <= i

    def softmax(self, x):
        x = np.asarray(x)
        work = np.promote_types(x.dtype, np.float32)  # float16 accumulates in float32
        return self._softmax(x.astype(work)).astype(x.dtype)

    @staticmethod
    def _softmax(x):
        lowest = np.finfo(x.dtype).min  # an np.float32 for a float32 x: no promotion
        shift = np.maximum(np.max(x, axis=-1, keepdims=True), lowest)  # finite, even for -inf rows
        e = np.exp(x - shift)  # (..., n), 0 at -inf
        total = np.sum(e, axis=-1, keepdims=True)  # 0 for an all -inf row, else >= 1
        return e / np.where(total > 0, total, 1.0)

    @staticmethod
    def _bias(mask, dtype):
        """log(mask): 0 where a key may be attended, -inf where it may not."""
        with np.errstate(divide="ignore"):  # log 0 = -inf is the point
            return np.log(np.asarray(mask, dtype=dtype))

    def attention(self, Q, K, V, mask=None):
        dtype = np.result_type(Q, K, V)
        work = np.promote_types(dtype, np.float32)
        Q, K, V = Q.astype(work), K.astype(work), V.astype(work)
        scores = Q @ np.swapaxes(K, -1, -2) * (1 / math.sqrt(Q.shape[-1]))  # (..., T_q, T_k)
        if mask is not None:
            finite = np.finfo(work).max
            scores = np.nan_to_num(scores, nan=0.0, posinf=finite, neginf=-finite)
            scores = scores + self._bias(mask, work)  # forbidden: finite − ∞ = −∞
        weights = self._softmax(scores)
        return (weights @ V).astype(dtype), weights.astype(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        return self.attention(Q, K, V, self.causal_mask(X.shape[-2]))


def _work(*tensors):
    """The dtype to compute in: the inputs' common dtype, float32 at least."""
    dtype = torch.float32
    for t in tensors:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def _softmax(x):
    lowest = torch.finfo(x.dtype).min
    shift = x.detach().amax(dim=-1, keepdim=True).clamp(min=lowest)  # finite, even for -inf rows
    e = torch.exp(x - shift)  # (..., n), 0 at -inf
    total = e.sum(dim=-1, keepdim=True)  # 0 for an all -inf row, else >= 1
    return e / torch.where(total > 0, total, 1.0)


def _bias(mask, dtype):
    """log(mask): 0 where a key may be attended, -inf where it may not."""
    return torch.log(mask.to(dtype))


def _masked(scores, bias):
    """Scores plus an additive bias, with the scores clamped first so +∞ − ∞ cannot happen."""
    finite = torch.finfo(scores.dtype).max
    return torch.nan_to_num(scores, nan=0.0, posinf=finite, neginf=-finite) + bias


class AdditiveTorch:
    """The lesson contract on torch tensors with masks as additive biases."""

    def causal_mask(self, T):
        return torch.ones(T, T).triu(diagonal=1).T.to(torch.bool) | torch.eye(T, dtype=torch.bool)

    def softmax(self, x):
        return _softmax(x.to(_work(x))).to(x.dtype)

    def attention(self, Q, K, V, mask=None):
        dtype = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
        work = _work(Q, K, V)
        Q, K, V = Q.to(work), K.to(work), V.to(work)
        scores = Q @ K.transpose(-2, -1) * (1 / math.sqrt(Q.shape[-1]))  # (..., T_q, T_k)
        if mask is not None:
            scores = _masked(scores, _bias(mask, work))  # forbidden: finite − ∞ = −∞
        weights = _softmax(scores)
        return (weights @ V).to(dtype), weights.to(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        return self.attention(Q, K, V, self.causal_mask(X.shape[-2]).to(X.device))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention with every mask summed into one additive bias."""
    dtype, work = query.dtype, _work(query, key, value)
    q, k, v = query.to(work), key.to(work), value.to(work)
    L, S = q.shape[-2], k.shape[-2]
    if enable_gqa:  # key/value head j serves query heads j*g .. j*g + g - 1
        g = q.shape[-3] // k.shape[-3]
        k = k.unsqueeze(-3).expand(k.shape[:-2] + (g,) + k.shape[-2:]).flatten(-4, -3)
        v = v.unsqueeze(-3).expand(v.shape[:-2] + (g,) + v.shape[-2:]).flatten(-4, -3)
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * factor  # (N, ..., H, L, S)
    bias = torch.zeros(L, S, dtype=work, device=q.device)  # (L, S): nothing forbidden yet
    if is_causal:  # top-left: query i sees keys 0 .. i
        bias = bias + _bias(torch.ones(L, S, device=q.device).tril(), work)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        bias = bias + _bias(attn_mask, work)  # True = may attend
    elif attn_mask is not None:
        bias = bias + attn_mask.to(work)  # a float mask already is a bias
    weights = _softmax(_masked(scores, bias))  # (N, ..., H, L, S)
    if dropout_p > 0:
        weights = torch.nn.functional.dropout(weights, dropout_p)  # survivors scaled 1/(1-p)
    return (weights @ v).to(dtype)


NUMPY = AdditiveNumpy()
TORCH = AdditiveTorch()
SDPA = scaled_dot_product_attention
