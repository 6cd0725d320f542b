"""PyTorch's own kernel: ``SDPA`` is F.scaled_dot_product_attention, the lesson is built on it.

The SDPA row is the function the contract is copied from, so any detector that flags it is
wrong about PyTorch rather than about attention. The lesson contract is expressed through the
same kernel, which returns only the output: weights are its output for an identity value
matrix (row i of softmax(·) @ I is row i of the weights), ``softmax(x)`` is one query attending
over keys whose scores are all 0 with x as the float mask, and ``causal_self_attention`` passes
``is_causal=True``. Leading dims are broadcast explicitly first, since the kernel expects Q, K
and V to agree on them.
"""

import numpy as np
import torch
import torch.nn.functional as F

from zoo import Decoy

DECOY = Decoy(
    id="builtin-sdpa",
    title="torch.nn.functional.scaled_dot_product_attention, and the lesson built on it",
    technique="PyTorch's fused kernel; weights recovered as the output for V = I, softmax as "
    "attention over zero scores with x as the additive mask",
    why_correct="the kernel is the contract's definition, softmax(S) @ I = softmax(S), and with "
    "all-zero scores plus bias x the attention weights are softmax(x)",
)


class BuiltinTorch:
    """The lesson contract on torch tensors, every softmax done by PyTorch's SDPA kernel."""

    def causal_mask(self, T):
        return torch.arange(T)[:, None] >= torch.arange(T)  # (T, T): query i >= key j

    def softmax(self, x):
        n = x.shape[-1]
        zeros = torch.zeros(x.shape[:-1] + (1, 1), dtype=x.dtype, device=x.device)  # (..., 1, 1)
        keys = zeros.expand(x.shape[:-1] + (n, 1))  # (..., n, 1): every score q·k is 0
        eye = torch.eye(n, dtype=x.dtype, device=x.device).expand(x.shape[:-1] + (n, n))
        weights = F.scaled_dot_product_attention(zeros, keys, eye, attn_mask=x[..., None, :])
        return weights[..., 0, :]  # (..., n) = softmax(0 + x) @ I

    def attention(self, Q, K, V, mask=None):
        T_q, T_k = Q.shape[-2], K.shape[-2]
        extra = () if mask is None else (mask.shape[:-2],)
        lead_w = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], *extra)  # the weights' lead
        lead = np.broadcast_shapes(lead_w, V.shape[:-2])  # the output's lead
        eye = torch.eye(T_k, dtype=V.dtype, device=V.device)  # (T_k, T_k): softmax(·) @ I

        def sdpa(lead, values):  # the kernel on Q, K, values and mask expanded to one lead
            masks = None if mask is None else mask.expand(lead + (T_q, T_k))  # True = may attend
            q, k, v = (t.expand(lead + t.shape[-2:]) for t in (Q, K, values))  # views, no copies
            return F.scaled_dot_product_attention(q, k, v, attn_mask=masks)

        return sdpa(lead, V), sdpa(lead_w, eye)  # (..., T_q, d_v), (..., T_q, T_k)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        T = X.shape[-2]
        eye = torch.eye(T, dtype=V.dtype, device=V.device).expand(V.shape[:-1] + (T,))
        out = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
        weights = F.scaled_dot_product_attention(Q, K, eye, is_causal=True)
        return out, weights


TORCH = BuiltinTorch()
SDPA = F.scaled_dot_product_attention
