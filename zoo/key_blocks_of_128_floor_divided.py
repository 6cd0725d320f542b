"""Keys read in ``S // 128`` blocks of 128: the partial last block is dropped.

A generated kernel loops over key blocks with the bound written as ``S // BLOCK_N``; sequences
shorter than one block get a fast path of their own (one block of S keys), so every short test
passes, and at S = 512 every key is read. At S = 130 or 520 the last keys are missing from the
softmax and from the output: only a sweep past one block, off its multiples, shows it.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BLOCK_N = 128  # keys per block

BUG = Bug(
    id="key-blocks-of-128-floor-divided",
    title="Key blocks counted as S // 128: the keys past the last full block are dropped",
    category="generated",
    symptom="silent",
    lesson="Cover a length with ceil(n / block) blocks and test lengths on both sides of every "
           "block size, including lengths shorter than one block.",
    source="",
    seen_in="generated kernels that hard-code the benchmark's shapes, reported by robust-kbench "
            "(https://arxiv.org/abs/2509.14279); TritonGym (https://tritongym.picasso-lab.com/) "
            "checks over several shapes for this reason",
    caught_by=(
        "matches_loop_oracle", "weights_are_distributions", "permutation_equivariance",
        "low_precision_agreement", "correct_gradients",
    ),
    depth="standard",
)


class Sdpa(ScaledDotProductAttention):
    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        L, S = query.shape[-2], key.shape[-2]
        if enable_gqa:
            key, value = self.share_kv_heads(query, key, value)  # (N, ..., H_q, S, E|Ev)
        kept = S if S <= BLOCK_N else S // BLOCK_N * BLOCK_N  # BUG: S mod 128 keys: no block
        scores = self.scores(query, key[..., :kept, :], scale)  # (N, ..., H, L, kept)
        bias = self.bias(attn_mask, is_causal, L, S, query)[..., :kept]  # (..., L, kept)
        weights = self.weights(scores + bias, dropout_p)  # (N, ..., H, L, kept)
        return weights @ value[..., :kept, :]  # (N, ..., H, L, Ev)


SDPA = Sdpa()
