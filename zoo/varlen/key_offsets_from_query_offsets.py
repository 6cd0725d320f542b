"""Keys cut with the queries' offsets: sequence b's keys are read from ``cu_seqlens_q[b]``.

In self-attention prefill the two offset arrays are equal, so the mistake hides; with a cache,
or any sequence whose key count differs from its query count, sequence b reads another
sequence's keys.
"""

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-key-offsets-from-query-offsets",
    title="Sequence b's keys start at cu_seqlens_q[b]: keys leak across sequences",
    category="packing",
    symptom="silent",
    lesson="Cut keys with cu_seqlens_k and queries with cu_seqlens_q; test sequences whose key "
           "and query counts differ.",
    source="",
    seen_in="https://github.com/facebookresearch/xformers/issues/1122 (a block-diagonal mask "
            "sized for one side used with the other: no error, a wrong result)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "lse_matches_output",
        "decode_matches_prefill",
        "page_placement_invariance",
        "per_sequence_equivalence",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "padding_is_never_read",
        "causal_diagonal_convention",
        "gradients_match_reference",
        "empty_row_convention",
        "window_counting_convention",
    ),
)


class Loop(SequenceLoop):
    def keys(self, k, v, b, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table):
        if block_table is not None:
            return super().keys(k, v, b, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table)
        start = int(cu_seqlens_q[b])  # BUG: the queries' offset, not cu_seqlens_k[b]
        used = int(cu_seqlens_k[b + 1] - cu_seqlens_k[b]) if seqused_k is None else int(
            seqused_k[b])
        return k[start:start + used], v[start:start + used]


VARLEN = Loop()
