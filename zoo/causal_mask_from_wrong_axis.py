"""The sequence length read from axis 1: `T = X.shape[1]`.

Written for batches (B, T, d_model), where axis 1 is time. For a single sequence (T, d_model)
axis 1 is the model width, so the causal mask is (d_model, d_model) and no longer fits the
(T, T) scores: a broadcast error. When d_model happens to equal T — the lesson's X = I example
— the mask fits by accident and every number is right, so the worked example does not notice.
The time axis is the one before the features: `X.shape[-2]` for every rank.
"""

from reference.lesson_numpy import LessonNumpy
from reference.lesson_torch import LessonTorch
from zoo import Bug

BUG = Bug(
    id="causal-mask-from-wrong-axis",
    title="causal_self_attention takes T = X.shape[1]: the model width for a (T, d_model) input",
    category="shapes",
    symptom="crash",
    lesson="Read the sequence length from the end, T = X.shape[-2], so every rank means the same.",
    source="",
    seen_in="self-attention modules that unpack `B, T, C = x.shape` or index `x.shape[1]`, "
            "later called on an unbatched sequence",
    caught_by=("matches_loop_oracle", "batch_consistency", "prefix_consistency", "causality"),
)


class Numpy(LessonNumpy):
    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        T = X.shape[1]  # BUG: time only for (B, T, d_model); for (T, d_model) it is d_model
        return self.attention(Q, K, V, self.causal_mask(T))


class Torch(LessonTorch):
    def causal_self_attention(self, X, W_q, W_k, W_v):
        Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
        T = X.shape[1]  # BUG: time only for (B, T, d_model); for (T, d_model) it is d_model
        return self.attention(Q, K, V, self.causal_mask(T).to(X.device))


NUMPY = Numpy()
TORCH = Torch()
