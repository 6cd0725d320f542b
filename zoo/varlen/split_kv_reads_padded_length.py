"""A split-KV kernel that takes the padded length for the sequence's: keys up to
``max_seqlen_k`` (within what is allocated) are attended, not ``seqused_k[b]``.

Under CUDA-graph replay the kernel is launched for the padded maximum; reading the maximum where
the actual length was meant attends to keys past the used ones (and moves the causal diagonal).
"""

from zoo import Bug
from zoo.varlen.decoys.split_kv import SplitKV

BUG = Bug(
    id="varlen-split-kv-reads-padded-length",
    title="The split-KV path bounds a sequence's keys by max_seqlen_k, not by its own length",
    category="packing",
    symptom="silent",
    lesson="Bound each sequence by its own key count (seqused_k); test a batch whose lengths are "
           "below the padded maximum.",
    source="",
    seen_in="https://github.com/Dao-AILab/flash-attention/pull/1192 (the split-KV varlen kernel "
            "read params.seqlen_k instead of the actual length)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "lse_matches_output",
        "page_placement_invariance",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "padding_is_never_read",
        "rows_without_keys_are_zero",
        "gradients_match_reference",
    ),
)


class Split(SplitKV):
    def used(self, b, seqused_k, allocated, max_seqlen_k):
        return min(max_seqlen_k, allocated)  # BUG: the padded length, seqused_k unread


VARLEN = Split()
