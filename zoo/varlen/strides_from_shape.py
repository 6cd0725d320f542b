"""Strides synthesized from the shape: q, k and v are read as if contiguous.

The kernel takes each tensor's base pointer and computes its offsets from the shape, as a
contiguous tensor's would be, instead of reading the tensor's strides. A caller's tensors are
often views: a model's ``(B, H, S, D).transpose(1, 2)``, the rows of a fused qkv projection, a
cache with k and v interleaved. flash-attention asks only that the last dimension be
contiguous, so those views reach the kernel and are read scrambled. Contiguous inputs, the
only ones a test builds with ``randn``, never show it.
"""

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import PagedTiles

BUG = Bug(
    id="varlen-strides-from-shape",
    title="Offsets computed from the shape as if contiguous: strided views are read scrambled",
    category="layout",
    symptom="silent",
    lesson="Read every tensor through its own strides (only stride(-1) == 1 may be assumed); "
           "test with transposed views, fused projections and interleaved caches.",
    source="",
    depth="standard",
    seen_in="https://github.com/Dao-AILab/flash-attention/pull/2667 (the SM100 head-dim-256 "
            "forward built its layouts with strides synthesized from the shape; "
            "transpose(1, 2) inputs were silently corrupted; fixed in #2670)",
    caught_by=(
        "matches_reference",
        "per_sequence_equivalence",
        "page_placement_invariance",
        "padding_is_never_read",
        "window_is_a_key_slice",
        "softcap_limit_and_order",
        "alibi_is_a_float_bias",
        "lse_matches_output",
        "gqa_with_every_feature",
        "gradients_match_reference",
    ),
)


def contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


class Tiles(PagedTiles):
    def operands(self, q, k, v):
        # BUG: the base pointer with strides made from the shape, not the tensors' own
        return tuple(t.as_strided(t.shape, contiguous_strides(t.shape)) for t in (q, k, v))


VARLEN = Tiles()
