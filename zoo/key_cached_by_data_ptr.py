"""The scaled, transposed key is cached under the key's ``data_ptr()``.

In cross-attention and in decoding the same key tensor comes back call after call, so its
preparation — ``(K·scale)ᵀ``, made contiguous for the matrix product — is done once and kept,
with the key's address, shape, dtype and the scale as the cache key (the key itself is held
too, so its address cannot be handed to another tensor while the entry lives). Fresh inputs
always miss. But a KV cache or a staging buffer is written in place: same object, same
address, new values — and every call after the first multiplies the queries by the keys that
were there before. (Only inference is cached: under autograd the key is prepared anew, so
a cached tensor never carries a stale graph.)
"""

import math

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="key-cached-by-data-ptr",
    title="The prepared key is cached under key.data_ptr() and goes stale when the key is "
          "refilled in place",
    category="state",
    symptom="silent",
    lesson="An address names memory, not values: a cache keyed by data_ptr() must also be "
           "invalidated by writes (the version counter, or a copy compared), or not be kept.",
    source="",
    seen_in="kernel wrappers that cache work derived from a tensor under its data_ptr(): "
            "the stale-after-in-place-update hazard flagged in "
            "https://github.com/flashinfer-ai/flashinfer/pull/3932 and the primitive cache "
            "keyed by buffer address fixed in https://github.com/tensorflow/tensorflow/pull/56218",
    caught_by=("answers_follow_values",),
)


class Sdpa(ScaledDotProductAttention):
    cached = None  # (address, shape, dtype, scale, key held alive, prepared key)

    def scores(self, query, key, scale):
        factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale  # 1/√E by default
        if query.requires_grad or key.requires_grad:  # training: a cached key's graph is stale
            return (query * factor) @ key.transpose(-2, -1)  # (N, ..., H, L, S)
        ask = (key.data_ptr(), key.shape, key.dtype, factor)
        if self.cached is None or self.cached[:4] != ask:  # BUG: the address, not the values
            prepared = (key * factor).transpose(-2, -1).contiguous()  # (N, ..., H, E, S)
            self.cached = ask + (key, prepared)
        return query @ self.cached[5]  # (N, ..., H, L, S)


SDPA = Sdpa()
