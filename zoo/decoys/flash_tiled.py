"""Flash-attention's online softmax: keys arrive in blocks, the score matrix never exists whole.

For each query row the loop keeps three running quantities over the keys seen so far: the
maximum score m, the sum l = Σ exp(s − m) and the accumulator acc = Σ exp(s − m)·v. When a new
block raises the maximum, l and acc are rescaled by exp(m_old − m_new); at the end
out = acc / l. Weights (for the lesson contract) are recomputed block by block from the saved
row statistics, as flash-attention's backward pass does: w = exp(s − m) / l.

A row that has seen no allowed key yet has m = −∞; it is shifted by 0 instead, so every
exp(−∞ − 0) is 0, l stays 0 and the row ends as zeros, never 0/0 — also when a whole block or
a whole row is masked. The maximum is only a shift (softmax does not depend on it), so the
torch versions detach it and autograd differentiates just the arithmetic that matters.

The block size is a constructor argument; the module's three names use three different sizes:
``NUMPY`` blocks of 3 keys, ``TORCH`` blocks of 1 key (the fully streaming extreme, a rescale
per key) and ``SDPA`` blocks of 4 keys. ``FlashNumpy(block=1)`` etc. give any other.
"""

import math

import numpy as np
import torch

from zoo import Decoy

DECOY = Decoy(
    id="flash-tiled",
    title="Tiled online softmax with a running max, a running sum and a rescaled accumulator",
    technique="flash-attention forward pass: keys in blocks (3 for NumPy, 1 for torch, 4 for "
    "SDPA), the softmax normaliser streamed, weights recomputed from the row statistics",
    why_correct="rescaling by exp(m_old − m_new) keeps acc = Σ exp(s − m)·v and l = Σ exp(s − m) "
    "for the current m, so acc / l is softmax(s)·v exactly; empty rows keep l = 0 and give 0",
)


class FlashNumpy:
    """The lesson contract on NumPy arrays, keys streamed ``block`` at a time."""

    def __init__(self, block=3):
        self.block = block

    def causal_mask(self, T):
        return np.arange(T)[None, :] <= np.arange(T)[:, None]  # (T, T): key j <= query i

    def softmax(self, x):
        x = np.asarray(x)
        work = np.promote_types(x.dtype, np.float32)  # float16 accumulates in float32
        spans = self._spans(x.shape[-1])
        blocks = [x[..., a:b].astype(work) for a, b in spans]  # each (..., b - a)
        m, l, _ = self._stream((s, None) for s in blocks)
        weights = np.concatenate([np.exp(s - m) / l for s in blocks], axis=-1)
        return weights.astype(x.dtype)

    def attention(self, Q, K, V, mask=None):
        dtype = np.result_type(Q, K, V)
        out, weights = self._attend(Q, K, V, mask)
        return out.astype(dtype), weights.astype(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        dtype = np.result_type(X, W_q, W_k, W_v)
        work = np.promote_types(dtype, np.float32)
        x = X.astype(work)
        Q, K, V = x @ W_q.astype(work), x @ W_k.astype(work), x @ W_v.astype(work)
        out, weights = self._attend(Q, K, V, self.causal_mask(X.shape[-2]))
        return out.astype(dtype), weights.astype(dtype)

    def _spans(self, n):
        return [(a, min(a + self.block, n)) for a in range(0, n, self.block)]

    def _attend(self, Q, K, V, mask):
        work = np.promote_types(np.result_type(Q, K, V), np.float32)
        Q, K, V = Q.astype(work), K.astype(work), V.astype(work)
        T_q, T_k = Q.shape[-2], K.shape[-2]
        scale = 1 / math.sqrt(Q.shape[-1])  # a Python float keeps float32 float32
        if mask is not None:
            mask = np.broadcast_to(mask, np.broadcast_shapes(np.shape(mask), (T_q, T_k)))

        def scores(a, b):  # (..., T_q, b - a): the block's scores, -inf where forbidden
            s = Q @ np.swapaxes(K[..., a:b, :], -1, -2) * scale
            return s if mask is None else np.where(mask[..., a:b], s, -np.inf)

        spans = self._spans(T_k)
        m, l, acc = self._stream((scores(a, b), V[..., a:b, :]) for a, b in spans)
        weights = np.concatenate([np.exp(scores(a, b) - m) / l for a, b in spans], axis=-1)
        return acc / l, weights  # (..., T_q, d_v), (..., T_q, T_k)

    @staticmethod
    def _stream(blocks):
        """Row max m, normaliser l (1 for empty rows) and Σ exp(s − m)·v over (s, v) blocks."""
        m, l, acc = -np.inf, 0.0, 0.0  # scalars that broadcast to (..., T_q, 1) and (..., T_q, d_v)
        for s, v in blocks:  # s (..., T_q, b) with -inf where forbidden, v (..., b, d_v) or None
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # (..., T_q, 1)
            shift = np.where(np.isneginf(m_new), 0.0, m_new)  # nothing allowed yet: shift by 0
            alpha = np.exp(m - shift)  # rescales the old sums to the new max; 0 while m = -inf
            p = np.exp(s - shift)  # (..., T_q, b) unnormalised weights, 0 where forbidden
            l = alpha * l + p.sum(axis=-1, keepdims=True)
            if v is not None:
                acc = alpha * acc + p @ v  # (..., T_q, d_v)
            m = m_new
        l = np.where(l > 0, l, 1.0)  # an empty row has acc = 0 and p = 0: dividing by 1 keeps 0
        return shift, l, acc


class FlashTorch:
    """The lesson contract on torch tensors, keys streamed ``block`` at a time."""

    def __init__(self, block=1):
        self.block = block

    def causal_mask(self, T):
        return torch.arange(T)[None, :] <= torch.arange(T)[:, None]  # (T, T): key j <= query i

    def softmax(self, x):
        work = torch.promote_types(x.dtype, torch.float32)
        blocks = [x[..., a:b].to(work) for a, b in self._spans(x.shape[-1])]
        m, l, _ = self._stream((s, None) for s in blocks)
        return torch.cat([torch.exp(s - m) / l for s in blocks], dim=-1).to(x.dtype)

    def attention(self, Q, K, V, mask=None):
        dtype = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
        out, weights = self._attend(Q, K, V, mask)
        return out.to(dtype), weights.to(dtype)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        work = torch.promote_types(X.dtype, torch.float32)
        x = X.to(work)
        Q, K, V = x @ W_q.to(work), x @ W_k.to(work), x @ W_v.to(work)
        out, weights = self._attend(Q, K, V, self.causal_mask(X.shape[-2]).to(X.device))
        return out.to(X.dtype), weights.to(X.dtype)

    def _spans(self, n):
        return [(a, min(a + self.block, n)) for a in range(0, n, self.block)]

    def _attend(self, Q, K, V, mask, scale=None, bias=None, dropout_p=0.0, weights=True):
        """(out, weights or None): softmax(Q Kᵀ·scale + bias, -inf where not mask) V, streamed."""
        work = torch.promote_types(torch.promote_types(Q.dtype, K.dtype), V.dtype)
        work = torch.promote_types(work, torch.float32)  # half precision accumulates in float32
        Q, K, V = Q.to(work), K.to(work), V.to(work)
        T_q, T_k = Q.shape[-2], K.shape[-2]
        scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
        if mask is not None:
            mask = mask.expand(np.broadcast_shapes(mask.shape, (T_q, T_k)))  # (..., T_q, T_k)
        if bias is not None:
            bias = bias.to(work).expand(np.broadcast_shapes(bias.shape, (T_q, T_k)))

        def scores(a, b):  # (..., T_q, b - a): the block's scores, -inf where forbidden
            s = Q @ K[..., a:b, :].transpose(-2, -1) * scale
            if bias is not None:
                s = s + bias[..., a:b]
            return s if mask is None else torch.where(mask[..., a:b], s, -math.inf)

        spans = self._spans(T_k)
        m, l, acc = self._stream(((scores(a, b), V[..., a:b, :]) for a, b in spans), dropout_p)
        if not weights:
            return acc / l, None  # (..., T_q, d_v)
        # recomputed from the row statistics, never stored while streaming
        weights = torch.cat([torch.exp(scores(a, b) - m) / l for a, b in spans], dim=-1)
        return acc / l, weights  # (..., T_q, d_v), (..., T_q, T_k)

    @staticmethod
    def _stream(blocks, dropout_p=0.0):
        """Row max m, normaliser l (1 for empty rows) and Σ exp(s − m)·v over (s, v) blocks.

        Dropout, if any, thins the accumulator only: l sums the undropped weights, so
        acc / l is dropout applied to the normalised weights, survivors scaled by 1/(1 − p).
        """
        m = l = acc = None
        for s, v in blocks:  # s (..., T_q, b) with -inf where forbidden, v (..., b, d_v) or None
            if m is None:  # scalars that broadcast to (..., T_q, 1) and (..., T_q, d_v)
                m = torch.full((), -math.inf, dtype=s.dtype, device=s.device)
                l = acc = torch.zeros((), dtype=s.dtype, device=s.device)
            m_new = torch.maximum(m, s.detach().amax(dim=-1, keepdim=True))  # a shift: no grad
            shift = torch.where(torch.isneginf(m_new), 0.0, m_new)  # nothing allowed yet: 0
            alpha = torch.exp(m - shift)  # rescales the old sums to the new max; 0 while m = -inf
            p = torch.exp(s - shift)  # (..., T_q, b) unnormalised weights, 0 where forbidden
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            if v is not None:
                kept = torch.nn.functional.dropout(p, dropout_p) if dropout_p > 0 else p
                acc = alpha * acc + kept @ v  # (..., T_q, d_v)
            m = m_new
        l = torch.where(l > 0, l, 1.0)  # an empty row has acc = 0 and p = 0: dividing by 1 keeps 0
        return shift, l, acc


class FlashSDPA(FlashTorch):
    """F.scaled_dot_product_attention's signature on the same streaming loop."""

    def __init__(self, block=4):
        super().__init__(block)

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:  # query head h reads key/value head h // g, g = H_q / H_kv
            g = query.shape[-3] // key.shape[-3]
            heads = torch.arange(query.shape[-3], device=query.device) // g
            key, value = key.index_select(-3, heads), value.index_select(-3, heads)
        allowed, bias = None, None
        if is_causal:  # top-left: query i sees keys 0 .. i
            allowed = torch.arange(S, device=query.device)[None, :] <= torch.arange(
                L, device=query.device)[:, None]
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            allowed = attn_mask if allowed is None else allowed & attn_mask
        elif attn_mask is not None:
            bias = attn_mask  # a float mask is added to the scaled scores
        out, _ = self._attend(query, key, value, allowed, scale, bias, dropout_p, weights=False)
        return out.to(query.dtype)


NUMPY = FlashNumpy(block=3)
TORCH = FlashTorch(block=1)
SDPA = FlashSDPA(block=4)
