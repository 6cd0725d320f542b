"""Causal aligned top-left (``j <= i``) where the contract is bottom-right (``j <= i + sk − sq``).

Flash-attention before 2.1, PyTorch's ``is_causal`` and xformers' ``LowerTriangularMask`` align
the first query with the first key; decoding against a cache then sees only the first key.
Square tests (sq = sk) cannot tell the two apart.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-causal-top-left",
    title="Causal mask aligned top-left (j <= i) in a bottom-right kernel",
    category="masking",
    symptom="silent",
    lesson="With sq != sk the causal diagonal is d = i + sk - sq; test with sq != sk, not only "
           "sq = sk.",
    source="",
    seen_in="https://github.com/NVIDIA/cudnn-frontend/pull/493 (a bottom-right reference and a "
            "top-left kernel agreed only because s_q == s_kv); "
            "https://github.com/Dao-AILab/flash-attention/issues/951",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "decode_matches_prefill",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "causal_diagonal_convention",
        "rows_without_keys_are_zero",
        "gradients_match_reference",
        "empty_row_convention",
        "window_counting_convention",
    ),
)


class Loop(SequenceLoop):
    def diagonal(self, sq, sk):
        return torch.arange(sq)[:, None]  # BUG: top-left, the offset sk - sq is missing


VARLEN = Loop()
