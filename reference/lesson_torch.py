"""The lesson contract on torch tensors: the same math as :mod:`reference.lesson_numpy`."""

import math

import torch


class LessonTorch:
    """softmax(Q Kᵀ / √d_k) V with a causal mask, as in seed 003's PyTorch listing."""

    def causal_mask(self, T):
        return torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): True on and below the diagonal

    def softmax(self, x):
        m = x.amax(dim=-1, keepdim=True)  # (..., 1) row maximum
        m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # an all -inf row: subtract 0
        e = torch.exp(x - m)  # (..., n) in [0, 1], exactly 0 at -inf
        total = e.sum(dim=-1, keepdim=True)  # (..., 1)
        return e / torch.where(total == 0, torch.ones_like(total), total)  # never 0/0

    def attention(self, Q, K, V, mask=None):
        d_k = Q.shape[-1]
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = torch.where(mask, scores, -math.inf)  # forbidden keys score -inf
        weights = self.softmax(scores)  # (..., T_q, T_k), rows sum to 1 (0 if empty)
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)

    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        T = X.shape[-2]
        # device placement: a no-op on the CPU, needed on a GPU (caught there with --device cuda)
        mask = self.causal_mask(T).to(X.device)  # pragma: no mutate
        return self.attention(Q, K, V, mask)


_lesson = LessonTorch()
causal_mask = _lesson.causal_mask
softmax = _lesson.softmax
attention = _lesson.attention
causal_self_attention = _lesson.causal_self_attention
