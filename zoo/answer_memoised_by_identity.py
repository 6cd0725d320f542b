"""The answer is memoised with ``functools.lru_cache``, which keys tensors by identity.

Attention over the same encoder output is asked for again and again (every decoding step of
a cross-attention layer), so the call is wrapped in ``lru_cache``. A tensor's ``__hash__`` is
its ``id()`` and the cache keeps the tensors it was called with alive, so a lookup hits
exactly when the caller passes the very same objects again — and never looks at their values.
Training is left alone (a cached tensor would hold a stale graph), so only inference is
memoised. Every test that builds its inputs afresh gets misses, and right answers. A caller that
refills its tensors in place (a preallocated batch, a KV cache written step by step) gets the
answer to the values those tensors held the first time; and since a hit returns the cached
tensor itself, whatever the caller wrote into an earlier answer comes back as the next one.
"""

import functools

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="answer-memoised-by-identity",
    title="The answer is memoised by lru_cache, keyed by the input tensors' identity",
    category="state",
    symptom="silent",
    lesson="Never memoise on tensors: torch.Tensor hashes by id(), so a cache hit says nothing "
           "about the values; key a cache on shapes and dtypes only, and return new memory.",
    source="",
    seen_in="functools.lru_cache wrapped around functions of tensors: the identity hashing is "
            "the sharp edge noted in https://github.com/dynamiqs/dynamiqs/pull/133, and the "
            "risk of a stale hit when tensors key a cache was raised in review of "
            "https://github.com/pytorch/pytorch/pull/111470",
    caught_by=("answers_follow_values",),
)


@functools.lru_cache(maxsize=8)  # BUG: hits on the same tensor objects, whatever they hold
def memoised(*args):
    return REFERENCE(*args)  # (N, ..., H, L, Ev), the cached object itself on a hit


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        args = (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        if any(a.requires_grad for a in (query, key, value)):  # training: nothing to reuse
            return super().__call__(*args)
        return memoised(*args)  # BUG: a cache that answers for the objects, not the values


REFERENCE = ScaledDotProductAttention()
SDPA = Sdpa()
