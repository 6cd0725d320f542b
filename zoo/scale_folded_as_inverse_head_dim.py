"""The default scale folded into the kernel as 1/E instead of 1/√E.

A generated kernel folds the softmax scale into the query before the product and writes the
default as ``1.0 / E`` — the square root lost in the folding. An explicit ``scale`` is honoured,
so a caller that passes one sees nothing wrong. With KernelBench's ``torch.rand`` inputs and
E = 1024 the scores are so close together that dividing them by 32 more leaves the softmax near
uniform either way: the output moves by less than 1e-2 and ``allclose`` passes.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="scale-folded-as-inverse-head-dim",
    title="Default scale folded into the query as 1/E instead of 1/√E",
    category="generated",
    symptom="silent",
    lesson="Check the default scale on inputs whose scores spread: a 1/E scale passes wherever "
           "the softmax is near uniform anyway.",
    source="",
    seen_in="the 1/d-instead-of-1/√d kernel of the research notes' NumPy check, which passes "
            "allclose(1e-2) on KernelBench's SDPA inputs; the tolerance's false passes are "
            "reported in https://github.com/ScalingIntelligence/KernelBench/issues/165",
    caught_by=(
        "known_answers", "gqa_head_mapping", "matches_loop_oracle", "scores_scaled_by_rsqrt_dk",
        "shift_invariance", "low_precision_agreement", "correct_gradients",
        "dropout_backward_uses_forward_mask",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = 1.0 / query.shape[-1] if scale is None else scale  # BUG: 1/E, not 1/√E
        return (query * factor) @ key.transpose(-2, -1)  # (N, ..., H, L, S)


SDPA = Sdpa()
