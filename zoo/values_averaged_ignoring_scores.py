"""The output is the mean of V over the keys: Q and K are never read.

A generated "kernel" that is very fast because it does almost nothing: every query gets the
average of the value rows. On KernelBench's scaled-dot-product problem the inputs are
``torch.rand`` with head dim 1024, so after the 1/√E scale the scores of a row differ by a few
tenths at most, the softmax is close to uniform, and the true answer is within 1e-2 of the
plain average of V. ``allclose(atol=rtol=1e-2)`` accepts it. With scores that actually differ
(``randn`` inputs, a small head dim, a mask) it is wrong everywhere.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="values-averaged-ignoring-scores",
    title="The output is the mean of V over the keys, ignoring Q·K",
    category="generated",
    symptom="silent",
    lesson="Test attention on inputs whose softmax is peaked (randn, small head dim, a mask): "
           "near-uniform weights make the mean of V look like the answer.",
    source="",
    seen_in="the uniform-output pattern METR filtered from its kernel tasks "
            "(https://metr.org/blog/2025-02-14-measuring-automated-kernel-engineering); "
            "KernelBench's SDPA problem feeds torch.rand inputs with head dim 1024, on which "
            "this passes allclose at 1e-2 "
            "(https://github.com/ScalingIntelligence/KernelBench/issues/165 for the "
            "tolerance's false passes)",
    caught_by=(
        "known_answers", "causal_alignment", "gqa_head_mapping", "matches_loop_oracle",
        "weights_are_distributions", "prefix_consistency", "causality", "mask_poisoning",
        "dropout_across_rates", "dropout_follows_the_seed", "dropout_is_inverted",
        "dropout_pattern_is_independent", "empty_rows_are_zero", "low_precision_agreement",
        "correct_gradients", "dropout_backward_uses_forward_mask",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L = query.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        mean = value.mean(dim=-2, keepdim=True)  # BUG: (N, ..., H, 1, Ev), Q and K never read
        return mean.expand(*mean.shape[:-2], L, mean.shape[-1]).clone()  # (N, ..., H, L, Ev)


SDPA = Sdpa()
