"""GQA heads mapped by modulo: query head h reads key/value head ``h % Hk``.

Consecutive query heads share a key/value head (``h // (Hq / Hk)``), as models are trained and
``repeat_interleave`` expands them; the modulo spreads them round-robin instead. With Hk = 1
(MQA) or Hq = Hk the two agree, so only a grouped case with Hk ≥ 2 shows it.
"""

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-gqa-head-by-modulo",
    title="Query head h reads key/value head h % Hk instead of h // (Hq / Hk)",
    category="heads",
    symptom="silent",
    lesson="Query head h reads key/value head h // (Hq // Hk); test GQA with Hk >= 2.",
    source="",
    seen_in="https://github.com/BobMcDear/attorch/issues/14 (heads mapped to the wrong head in a "
            "Triton attention kernel)",
    caught_by=(
        "matches_reference",
        "gqa_with_every_feature",
        "softcap_limit_and_order",
        "gradients_match_reference",
    ),
)


class Loop(SequenceLoop):
    def kv_head(self, h, Hq, Hk):
        return h % Hk  # BUG: round-robin instead of consecutive groups


VARLEN = Loop()
