"""One program per (batch, head) slice, on a launch grid whose axis stops at 65535.

A GPU kernel launches one block per (batch, head) slice along a grid axis, and that axis holds
at most 65535 blocks. Past it the launch fails — on some paths without raising, as FlashInfer's
trtllm kernels did — and the output buffer keeps whatever it held: here zeros for every slice
past the 65535th. Decoding a large batch with many heads, or folding heads into the batch,
reaches that count with one token per slice; every test with a handful of heads passes.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

GRID = 65535  # the largest number of blocks along one grid axis

BUG = Bug(
    id="grid-capped-at-65535",
    title="(batch, head) slices past a grid axis's 65535 blocks are never computed",
    category="shapes",
    symptom="silent",
    lesson="Check every launch dimension against its limit, and fold the excess into another "
           "axis (or loop) instead of dropping it.",
    source="",
    seen_in="FlashInfer's trtllm attention with more than 65535 decode rows, which gave wrong "
            "results without an exception (https://github.com/flashinfer-ai/flashinfer/issues/"
            "3125); torch's memory-efficient SDPA (https://github.com/pytorch/pytorch/issues/"
            "142228) and xformers (https://github.com/facebookresearch/xformers/issues/845) "
            "fail at batch 65536",
    caught_by=("matches_loop_oracle", "weights_are_distributions", "batch_consistency",
               "low_precision_agreement", "correct_gradients"),
    depth="deep",
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        out = super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                               enable_gqa)  # (N, ..., H, L, Ev)
        if out.dim() < 3:
            return out
        slices = out.reshape(-1, *out.shape[-2:])  # (N·…·H, L, Ev): one block each
        launched = slices.new_zeros(slices.shape)  # the output buffer, zeroed
        launched[:GRID] = slices[:GRID]  # BUG: blocks past the grid's limit never run
        return launched.reshape(out.shape)


SDPA = Sdpa()
