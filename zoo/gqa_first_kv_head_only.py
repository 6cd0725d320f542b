"""Every query head reads key/value head 0.

Multi-query attention has one key/value head, and `key.expand(N, H_q, S, E)` shares it with all
query heads. Generalised to grouped heads the expand fails — a size-H_kv axis cannot expand to
H_q — and the error goes away when the head axis is sliced to size 1 first:
`key[:, :1].expand(...)`. That runs for every H_kv and is right for H_kv = 1, which is where it
was tested; with grouped heads, kv heads 1 … H_kv−1 are silently ignored.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="gqa-first-kv-head-only",
    title="GQA broadcasts key/value head 0 to every query head",
    category="heads",
    symptom="silent",
    lesson="Give each group of query heads its own kv head; a broadcast of one head is only MQA.",
    source="",
    seen_in="multi-query attention code (one shared kv head) extended to grouped-query "
            "checkpoints by slicing the head axis so that expand stops complaining",
    caught_by=(
        "gqa_head_mapping", "matches_loop_oracle", "output_is_weighted_values",
        "head_independence",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def share_kv_heads(self, query, key, value):
        H_q = query.shape[-3]
        key = key[..., :1, :, :]  # BUG: (N, ..., 1, S, E): kv head 0 only, so expand works
        value = value[..., :1, :, :]  # BUG: (N, ..., 1, S, Ev): likewise
        key = key.expand(*key.shape[:-3], H_q, *key.shape[-2:])  # (N, ..., H_q, S, E)
        value = value.expand(*value.shape[:-3], H_q, *value.shape[-2:])  # (N, ..., H_q, S, Ev)
        return key, value


SDPA = Sdpa()
