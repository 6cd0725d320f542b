"""The answer is cached by the inputs' shapes: the same shape gets the same answer.

A generated kernel "warms up" by caching its output keyed on what a launcher keys its plans
on — shapes, dtype and device — and returns a copy of the cached tensor on every later call
of that shape. The first call is right; every later one answers the first call's question.
A benchmark that times one shape over and over sees a very fast kernel; its correctness trials
differ only in the seed, and the answer hardly depends on it when the weights are uniform.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="answer-memoised-by-shape",
    title="The output cached by input shape: a second call of the same shape gets the first "
          "call's answer",
    category="generated",
    symptom="silent",
    lesson="Cache plans by shape, never answers: check that new values of the same shape give "
           "a new answer.",
    source="",
    seen_in="the outputs that did not depend on the seed which METR filtered from its kernel "
            "tasks (https://metr.org/blog/2025-02-14-measuring-automated-kernel-engineering), "
            "and the caching hacks listed in wafer.ai's field guide "
            "(https://www.wafer.ai/blog/reward-hacks-field-guide)",
    caught_by=(
        "known_answers", "batch_consistency", "permutation_equivariance",
        "scores_scaled_by_rsqrt_dk", "dropout_follows_the_seed", "low_precision_agreement",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        args = (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        if any(a.requires_grad for a in (query, key, value)):  # training: no cache
            return super().__call__(*args)
        mask = None if attn_mask is None else (tuple(attn_mask.shape), attn_mask.dtype)
        plan = (tuple(query.shape), tuple(key.shape), tuple(value.shape), query.dtype,
                query.device, mask, dropout_p, is_causal, scale, enable_gqa)
        answers = self.__dict__.setdefault("answers", {})  # plan -> the first output
        if plan not in answers:
            answers[plan] = super().__call__(*args)  # (N, ..., H, L, Ev)
        return answers[plan].clone()  # BUG: the answer of the first call of this shape


SDPA = Sdpa()
