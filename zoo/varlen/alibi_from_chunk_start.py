"""ALiBi distance counted from the query chunk's start: ``|i − j|``, not ``|i + sk − sq − j|``.

The bias is built from the positions of the current queries, as if the first query sat at key 0.
Prefill (sq = sk) is right; at every decode step the one query is taken for position 0, so the
bias penalises the newest keys and favours the oldest.
"""

import torch

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-alibi-from-chunk-start",
    title="ALiBi distance measured from the query chunk's start, wrong at decode and in chunks",
    category="scores",
    symptom="silent",
    lesson="Measure ALiBi from the query's diagonal i + sk - sq; compare decode with the last "
           "row of the prefill.",
    source="",
    seen_in="https://github.com/keras-team/keras-hub/pull/2977 (Falcon's ALiBi built over the "
            "query window: no bias at any decode step)",
    caught_by=(
        "alibi_is_a_float_bias",
        "matches_reference",
        "decode_matches_prefill",
        "softcap_limit_and_order",
        "gradients_match_reference",
    ),
)


class Loop(SequenceLoop):
    def bias(self, alibi_slopes, b, h, sq, sk, work):
        if alibi_slopes is None:
            return None
        slope = alibi_slopes[b, h] if alibi_slopes.dim() == 2 else alibi_slopes[h]
        i = torch.arange(sq)[:, None]  # BUG: the query's index in the chunk, not its diagonal
        return -slope.to(work) * (i - torch.arange(sk)[None, :]).abs()


VARLEN = Loop()
