"""``seqused_k`` ignored: every allocated key is attended, the padding past the used ones too.

A cache allocates more than it has filled; ``seqused_k`` says how much is real. Reading the whole
allocation attends to stale or garbage keys, and a test that allocates exactly what it uses
cannot see it.
"""

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-seqused-k-ignored",
    title="seqused_k ignored: the keys allocated past those used are attended",
    category="packing",
    symptom="silent",
    lesson="Bound every sequence's keys by seqused_k; test with keys allocated past those used.",
    source="",
    seen_in="https://github.com/jax-ml/jax/issues/23349 (key_value_seq_lengths ignored, padded "
            "keys leak)",
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


class Loop(SequenceLoop):
    def keys(self, k, v, b, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table):
        if block_table is None:
            start, end = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
            return k[start:end], v[start:end]  # BUG: seqused_k[b] is never read
        pages = [int(p) for p in block_table[b]]  # BUG: every page of the row, all slots
        return k[pages].flatten(0, 1), v[pages].flatten(0, 1)


VARLEN = Loop()
