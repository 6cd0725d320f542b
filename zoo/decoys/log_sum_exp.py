"""Softmax in log space: weights = exp(scores − logsumexp(scores)), no division anywhere.

logsumexp(x) = m + log Σ exp(x − m) for the row maximum m, so each exp is at most 1 and nothing
overflows. m and log Σ are kept apart and subtracted one after the other,
exp((x − m) − log Σ), so that x − m stays exact where x is close to m instead of losing the
bits of a large m + log Σ sum. A row with no allowed key has m = −∞ and Σ = 0: it is shifted
by 0 and its log Σ taken as 0, so every exp(−∞) is 0 and the row stays 0. The log-normaliser is
written out rather than taken from ``torch.logsumexp``, whose backward is NaN on such a row.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="log-sum-exp",
    title="Weights as exp(scores − logsumexp(scores))",
    technique="log-space softmax: subtract the row's log-normaliser m + log Σ exp(x − m) and "
    "exponentiate, with no division",
    why_correct="exp(x − logsumexp(x)) = exp(x) / Σ exp(x) is the softmax by definition, the "
    "max shift makes every exp at most 1, and an empty row is exp(−∞) = 0 everywhere",
)


class LogSumExpNumpy:
    """The lesson contract on NumPy arrays with a log-space softmax."""

    def causal_mask(self, T):
        return np.greater_equal.outer(np.arange(T), np.arange(T))  # (T, T): i >= j

    def softmax(self, x):
        x = np.asarray(x)
        work = np.promote_types(x.dtype, np.float32)  # float16 accumulates in float32
        return self._softmax(x.astype(work)).astype(x.dtype)

    def _softmax(self, x):
        m = np.max(x, axis=-1, keepdims=True)  # (..., 1)
        m = np.where(np.isneginf(m), 0.0, m)  # an empty row: shift by 0, not by -inf
        total = np.sum(np.exp(x - m), axis=-1, keepdims=True)  # (..., 1), 0 for an empty row
        log_total = np.log(np.where(total > 0, total, 1.0))  # log Σ, 0 for an empty row
        return np.exp((x - m) - log_total)  # exp(x − logsumexp(x))

    def attention(self, Q, K, V, mask=None):
        dtype = np.result_type(Q, K, V)
        work = np.promote_types(dtype, np.float32)
        Q, K, V = Q.astype(work), K.astype(work), V.astype(work)
        scores = np.matmul(Q, np.swapaxes(K, -1, -2)) * (1 / math.sqrt(Q.shape[-1]))
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)  # (..., T_q, T_k): forbidden = log 0
        weights = self._softmax(scores)
        return np.matmul(weights, V).astype(dtype), weights.astype(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        return self.attention(Q, K, V, self.causal_mask(X.shape[-2]))


class LogSumExpTorch:
    """The lesson contract on torch tensors with a log-space softmax."""

    def causal_mask(self, T):
        i = torch.arange(T)
        return i[:, None] >= i[None, :]  # (T, T): i >= j

    def softmax(self, x):
        work = torch.promote_types(x.dtype, torch.float32)  # half accumulates in float32
        return self._softmax(x.to(work)).to(x.dtype)

    def _softmax(self, x):
        m = x.detach().amax(dim=-1, keepdim=True)  # (..., 1): only a shift, it carries no grad
        m = torch.where(torch.isneginf(m), 0.0, m)  # an empty row: shift by 0, not by -inf
        total = torch.exp(x - m).sum(dim=-1, keepdim=True)  # (..., 1), 0 for an empty row
        log_total = torch.log(torch.where(total > 0, total, 1.0))  # log Σ, 0 for an empty row
        return torch.exp((x - m) - log_total)  # exp(x − logsumexp(x))

    def attention(self, Q, K, V, mask=None):
        dtype = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
        work = torch.promote_types(dtype, torch.float32)
        Q, K, V = Q.to(work), K.to(work), V.to(work)
        scores = torch.matmul(Q, K.transpose(-1, -2)) * (1 / math.sqrt(Q.shape[-1]))
        if mask is not None:
            scores = torch.where(mask, scores, -math.inf)  # (..., T_q, T_k): forbidden = log 0
        weights = self._softmax(scores)
        return torch.matmul(weights, V).to(dtype), weights.to(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        return self.attention(Q, K, V, self.causal_mask(X.shape[-2]).to(X.device))


NUMPY = LogSumExpNumpy()
TORCH = LogSumExpTorch()
