"""The contract: what correct scaled dot-product attention must do.

Every implementation in the zoo, every decoy and every detector refers to the clauses below by
their labels; a detector states one of them as a property and tests it through behaviour.

The lesson contract (seed 003, «Практика»), for NumPy arrays and torch tensors alike:

C1  ``causal_mask(T)`` returns a bool array of shape ``(T, T)``, True where token i may attend
    to token j, that is where ``j <= i``.
C2  ``softmax(x)`` is the softmax over the last axis: every row is non-negative and sums to 1,
    ``softmax(x + c) == softmax(x)`` for a constant ``c`` per row, so large inputs never
    overflow, and an entry of ``-inf`` gets weight exactly 0.
C3  ``attention(Q, K, V, mask=None)`` returns ``(out, weights)``. Q is ``(..., T_q, d_k)``,
    K ``(..., T_k, d_k)``, V ``(..., T_k, d_v)``; leading dims broadcast. ``mask`` is bool and
    broadcastable to ``(..., T_q, T_k)``, True = may attend.
    ``weights = softmax(Q Kᵀ / √d_k)`` with masked scores at ``-inf``; ``out = weights @ V``.
C4  ``causal_self_attention(X, W_q, W_k, W_v)`` returns
    ``attention(X W_q, X W_k, X W_v, causal_mask(T))`` for X of shape ``(T, d_model)`` or
    ``(B, T, d_model)``.
C5  A query row with no allowed key gets all-zero weights and an all-zero output row, never
    NaN (what ``torch.nn.functional.scaled_dot_product_attention`` returns since 2.5). A target
    may declare the other convention libraries document instead (``--empty-rows uniform``, as
    JAX and keras mask with a large negative fill: weight 1/S on each of the S keys, the mean of
    the values) and is then judged by it (``detectors.kit.conventions``); never NaN.
C6  The output dtype follows the input dtype. At float32, float16 and bfloat16 the error
    against exact (float64) attention is at most a small multiple of this reference's own
    error at that precision.
C7  A call has no side effects and no memory: the caller's arrays are never modified, and the
    same call returns bit-identical results, whatever was called before it.

The SDPA contract: a callable with the signature of
``torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=None,
dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)`` that returns the output only,
for shapes ``(N, ..., H, L, E)``. C5, C6 and C7 hold for it too, and:

S1  A bool ``attn_mask`` is True where a query may attend (declared otherwise with the
    ``drop`` convention of ``nn.MultiheadAttention``); a float ``attn_mask`` is added to the
    scaled scores. Both broadcast to ``(..., L, S)``.
S2  ``is_causal`` lets query i attend key j when ``j <= i`` (top-left alignment), or when
    ``j <= i + S - L`` where bottom-right alignment is declared (flash-attention >= 2.1).
S3  ``scale`` multiplies ``query @ keyᵀ`` and defaults to ``1/√E``.
S4  With ``enable_gqa``, key/value head j serves the ``g = H_q / H_kv`` consecutive query heads
    ``j·g … j·g + g − 1``.
S5  ``dropout_p`` zeroes each weight with probability p and scales the survivors by
    ``1/(1 − p)``; with ``dropout_p=0`` nothing is random.
S6  Where autograd applies, the backward pass gives the gradients of the forward pass.

The varlen contract (flash-attention's packed, variable-length calling convention): a callable
``attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
seqused_k=None, block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1),
softcap=0.0, alibi_slopes=None, return_lse=False)`` returning ``out`` or ``(out, lse)``. q is
``(total_q, Hq, D)``; k, v are ``(total_k, Hk, D|Dv)``, or paged ``(num_blocks, block_size, Hk,
D|Dv)``. Per sequence b, sq is its query count, sk its key count, and ``d = i + sk − sq`` is the
diagonal of query i (0-based within the sequence). Libraries differ on V3, V4, V6 and V8: a
target declares its convention and is judged by it (docs/varlen.md lists them).

V1  Sequence b is q rows ``cu_seqlens_q[b] … cu_seqlens_q[b+1]−1`` and k/v rows
    ``cu_seqlens_k[b] …`` (the first ``seqused_k[b]`` of them when given); sequences never see
    each other. ``cu_seqlens`` are ``(B+1,)`` int32 from 0, non-decreasing; ``max_seqlen_q``
    and ``max_seqlen_k`` bound every sq and sk (kernels size their grids by them).
V2  Paged: key p of sequence b is ``k[block_table[b, p // block_size], p % block_size]`` for
    ``p < seqused_k[b]``; where the blocks lie physically changes nothing.
V3  ``causal`` lets query i see key j when ``j <= d`` (bottom-right, flash-attention >= 2.1); a
    target may declare top-left (``j <= i``, PyTorch's ``is_causal``).
V4  ``window_size=(wl, wr)`` lets query i see keys ``d − wl <= j <= d + wr``, ends included, −1
    unbounded on its side; with ``causal`` both hold. HF's ``sliding_window=W`` is ``(W−1, 0)``.
V5  Scores are ``s = scale·q·k`` (scale defaults to 1/√D), then ``softcap·tanh(s/softcap)``
    when softcap > 0, before the bias and the mask.
V6  ALiBi adds ``−slope·|d − j|`` to the capped score, slopes ``(Hq,)`` or ``(B, Hq)``
    (FlashInfer's signed ``slope·(j − i)`` agrees only under causal, up to a row constant).
V7  GQA: query head h reads key/value head ``h // (Hq / Hk)``; Hq is a multiple of Hk.
V8  A query row with no visible key outputs 0 and has LSE −inf (flash-attention 3; FA2's
    non-split path gives +inf, which a target may declare); never NaN.
V9  Rows of q past ``cu_seqlens_q[-1]`` belong to no sequence: a call must not write them in a
    caller's buffer; a fresh output leaves them undefined (the reference returns 0, LSE −inf).
V10 ``lse[h, t]`` is the natural log of the softmax normaliser of row t, head h: logsumexp of the
    visible scores after cap and bias; ``(Hq, total_q)``, float32 (float64 for float64 inputs).
V11 The output dtype follows the input; scores and softmax of float16/bfloat16 run in float32,
    and the error against float64 is a small multiple of the format's unit roundoff.
V12 q, k and v may be any strided views whose last dimension is contiguous (flash-attention asks
    no more: https://github.com/Dao-AILab/flash-attention/issues/1149): head-major storage, rows
    of a fused projection, an interleaved cache, a storage offset; the answer is the same.

Implementations here: :mod:`reference.lesson_numpy` and :mod:`reference.lesson_torch` (the lesson
contract), :mod:`reference.sdpa` (the SDPA contract), and :mod:`reference.loop_oracle`, plain
Python loops over queries and keys that the differential detector trusts instead of the
vectorised code, so the reference is never its own judge. The varlen contract has
:mod:`reference.varlen` and its own plain-loop judge, :mod:`reference.varlen_loop`.
"""

# C6: the float dtypes the contract covers, finest first (bfloat16, coarsest, is the last)
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")

CLAUSES = {
    "C1": "causal_mask(T) is bool (T, T), True where j <= i",
    "C2": "softmax is over the last axis, shift-invariant and exactly 0 at -inf",
    "C3": "attention returns (softmax(QKᵀ/√d_k, masked to -inf), weights @ V) for broadcast shapes",
    "C4": "causal_self_attention is attention of the projections under causal_mask(T)",
    "C5": "a row with no allowed key gives zero weights and a zero output row, never NaN",
    "C6": "the output dtype follows the input; low-precision error is bounded by the reference's",
    "C7": "no side effects and no memory: inputs untouched, repeated calls bit-identical",
    "S1": "bool attn_mask True = attend (or the declared convention); float attn_mask is added",
    "S2": "is_causal is aligned top-left (or the declared bottom-right) when L != S",
    "S3": "scale multiplies QKᵀ and defaults to 1/√E",
    "S4": "enable_gqa: key/value head j serves query heads j·g … j·g+g-1",
    "S5": "dropout zeroes with probability p and rescales by 1/(1-p); p = 0 is deterministic",
    "S6": "the backward pass gives the gradients of the forward pass",
    "V1": "varlen: cu_seqlens pack the sequences; each sequence attends only within itself",
    "V2": "paged KV: key p < seqused_k[b] is block block_table[b, p // P], slot p % P",
    "V3": "causal is aligned bottom-right, j <= i + sk - sq (or a declared top-left)",
    "V4": "window (wl, wr) keeps i+sk-sq-wl <= j <= i+sk-sq+wr, ends included, -1 unbounded",
    "V5": "scores are scale·q·k (1/√D by default), then softcap·tanh(s/softcap), before bias",
    "V6": "ALiBi adds -slope·|i + sk - sq - j|, slopes (Hq,) or (B, Hq)",
    "V7": "GQA: query head h reads key/value head h // (Hq / Hk)",
    "V8": "a row with no visible key outputs 0 and LSE -inf, never NaN",
    "V9": "rows past cu_seqlens_q[-1] belong to no sequence and are never written",
    "V10": "LSE is the log of the softmax normaliser, (Hq, total_q), float32 or wider",
    "V11": "the output dtype follows the input; low-precision error is a few unit roundoffs",
    "V12": "q, k, v may be strided views (last dimension contiguous): the answer is the same",
}
