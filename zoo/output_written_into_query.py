"""The output is written into the query's storage and the query tensor is returned.

A generated kernel saves an allocation: when the output has the query's shape and dtype (E =
Ev, as in every benchmark), it writes the result over ``query`` in place and returns it. The
returned numbers are right. But the caller's query is gone: the reference computed before the
kernel never notices, a residual connection or a second attention over the same query reads
the output instead, and under autograd the in-place write would raise — so training keeps the
allocation, and only inference is wrong.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="output-written-into-query",
    title="The output written over the query in place and the query returned",
    category="generated",
    symptom="silent",
    lesson="Never write into an input: check that every input holds the same values after the "
           "call, and that the output shares memory with none of them.",
    source="",
    seen_in="input mutation, one of the adversarial cases KernelBench added to its checks "
            "(https://github.com/ScalingIntelligence/KernelBench/pull/82), and among the "
            "patterns of wafer.ai's field guide "
            "(https://www.wafer.ai/blog/reward-hacks-field-guide)",
    caught_by=("input_immutability",),
    depth="standard",
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        out = super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                               enable_gqa)  # (N, ..., H, L, Ev)
        if out.requires_grad or out.shape != query.shape or out.dtype != query.dtype:
            return out
        return query.copy_(out)  # BUG: the caller's query overwritten, and returned


SDPA = Sdpa()
