"""jax.nn.dot_product_attention (jax[cpu], its XLA implementation) on the varlen call.

JAX has no packed sequences: it takes a padded batch (B, T, N, H) with ``query_seq_lengths``
and ``key_value_seq_lengths``, its own spelling of which rows and keys are padding. So the
adapter lays sequence b's queries and its allocated keys (``cu_seqlens_k[b]`` up to
``cu_seqlens_k[b+1]``, those past ``seqused_k`` included) in row b of a zero-filled batch,
passes the query counts and the used key counts as those lengths, and reads the owned rows
back; rows of q past ``cu_seqlens_q[-1]`` belong to no sequence, are never sent, and come back
0 with LSE −inf (V9). Everything else is JAX's own:

- causal: ``is_causal``, whose mask is ``jnp.tril`` of the (T, S) block, so query i sees keys
  0..i: top-left, which this adapter declares (each sequence starts at row 0 of its batch row);
- the window: ``local_window_size=(left, right)``, counted from the same diagonal, both ends
  kept (the documentation's example: (3, 2) lets token 6 attend to 3..8); JAX has no −1 for
  an unbounded side, so an unbounded side is passed as T + S, wider than any distance;
- ALiBi: JAX has none of its own; its ``bias`` is the documented way to add a float to the
  logits ("bias array to be added to logits", after the scale and before the masks), so the
  adapter passes ``−slope·|i − j|`` on JAX's diagonal there, as a caller of JAX would write it;
  the slopes are not otherwise touched. Softcapping has no JAX spelling (a ``bias`` is added,
  not a tanh), so it is declared unsupported and refused;
- GQA: JAX's own (N a multiple of K); the scale: ``scale``; the LSE: ``return_residual=True``
  (the logsumexp, shape (B, T, N), read as (N, total_q), values untouched);
- a paged cache: gathered by the adapter (:func:`._flex.gather_pages`), so page placement tests
  the adapter, not JAX;
- torch ↔ NumPy ↔ JAX arrays, values and dtype unchanged; float64 needs ``jax_enable_x64``,
  switched on before each call, as the SDPA survey's adapter does;
- gradients: JAX differentiates its own functions (``jax.vjp``), not torch's graph, so when q,
  k or v requires grad the call is made through ``jax.vjp`` and a ``torch.autograd.Function``
  whose backward pads the upstream gradient, calls JAX's vjp and packs its answers (rows and
  keys no sequence owns get 0); the LSE is JAX's ``stop_gradient``-ed residual, no gradient.
"""

import functools

from attnzoo.survey.varlen_adapters import Declaration, Review, loader

API = "https://docs.jax.dev/en/latest/_autosummary/jax.nn.dot_product_attention.html"
SOURCE = "https://github.com/jax-ml/jax/blob/main/jax/_src/nn/functions.py"

DECLARATION = Declaration(
    name="jax-nn", title="jax.nn.dot_product_attention", distribution="jax", module="jax",
    docs=API,
    converts="packed sequences to one zero-padded (B, T, N, H) batch with JAX's own "
             "query_seq_lengths and key_value_seq_lengths (keys past seqused_k laid in and "
             "marked by those lengths), the owned rows read back, guard rows 0 with LSE -inf; "
             "an unbounded window side (-1) as T + S; ALiBi as JAX's documented float bias "
             "-slope*|i - j|; the paged cache gathered by the adapter; torch to NumPy and back, "
             "and torch autograd to JAX's own jax.vjp and back.",
    # _get_causal_mask is jnp.tril(ones((T, S))): query i sees keys 0..i
    causal_alignment="top-left", causal_alignment_docs=SOURCE,
    # JAX states nothing for a row with no visible key; its XLA path replaces every masked
    # logit by a large negative number (_apply_masks), so such a row averages the padded keys
    # uniformly, which none of the varlen conventions is: the contract's is declared, and the
    # probe's finding is reviewed as JAX's convention
    empty_rows="zero", empty_rows_docs=SOURCE,
    # "if local_window_size == (3, 2) ... token c can attend to [3, 4, 5, c, 7, 8]"
    window_counting="inclusive", window_counting_docs=API,
    # no softcap argument; "value: value array, should have the same shape as the key array"
    unsupported=("softcap", "dv_ne_d"), unsupported_docs=API,
    # "Softmax is always computed in float32" (_get_large_negative; _dot_product_attention_core
    # casts the logits to float32 before the softmax): float64 inputs get float32 accuracy
    # (checked on jax 0.10.2: about 1e-7 from a float64 softmax, where float64's tolerance is
    # 1e-10), so only float32 is surveyed
    dtypes=("float32",), dtypes_docs=SOURCE,
    install="pip install 'jax[cpu]' torch",
)

# the survey's flagged detectors read against the documentation (docs/survey-varlen.md)

EMPTY_ROWS = dict(
    kind="convention", docs=SOURCE,
    says="mask is 'used to filter out logits' (the API page); the XLA path (_apply_masks) puts "
         "a large negative number (-0.7 times float32's max) in place of every masked logit "
         "before a float32 softmax, so a query that sees no key weighs every key slot of its "
         "batch row equally.",
    note="the first failing case is such a row: sequence 0 has queries and no key, and its "
         "rows come back as the mean of the value slots of its batch row (the zeros the "
         "padded batch holds, and keys allocated past seqused_k), with LSE about -2.4e38 + "
         "log S, not 0 and -inf. Which slots it averages depends on the batch's padding, so "
         "the same sequence run alone differs, and a NaN in an unused key's value reaches it. "
         "None of the varlen conventions (zero, lse +inf, unmasked) is this uniform average. "
         "With ALiBi, a row its causal window leaves without a key (the battery's ALiBi on "
         "rows that see no key) averages the same way, and its gradient reaches those values "
         "(checked on jax 0.10.2).",
    reproduce="""
import jax, numpy as np
q, k, v = np.random.default_rng(0).standard_normal((3, 1, 2, 1, 8), dtype=np.float32)
out = jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=np.array([0], np.int32))
print(out[0, :, 0, :3])  # both rows: the mean of the two value rows, not 0
print(v[0, :, 0, :3].mean(0))
""")

MASKED_VALUES_READ = dict(
    kind="divergence", docs=API,
    says="key_value_seq_lengths gives each batch row's number of keys and values, the rest "
         "being padding (https://github.com/jax-ml/jax/pull/22516 added it so that a backend "
         "need not compute the padding); a masked logit is filtered out.",
    note="a NaN in the value of a key past key_value_seq_lengths reaches the output of rows "
         "that do see keys: the padded key gets weight 0, and 0 * NaN is NaN (a NaN in a "
         "padded key, not value, changes nothing). The survey's first failing case is an "
         "empty row, which averages every slot (empty_row_convention's review); with empty "
         "rows set aside (check --empty-rows unmasked) the same case fails at a row with keys. "
         "The keys are there because the caller's packed buffer holds them (allocated past "
         "seqused_k); flash-attention's varlen kernels never read them (checked on jax "
         "0.10.2). SDPA had the same with a boolean mask: "
         "https://github.com/pytorch/pytorch/issues/101967 (closed).",
    reproduce="""
import jax, numpy as np
q, k, v = np.random.default_rng(0).standard_normal((3, 1, 3, 1, 8), dtype=np.float32)
v[0, 2] = np.nan  # key 2: past key_value_seq_lengths, padding
out = jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=np.array([2], np.int32))
print(np.isnan(out).any())  # True
""")

REVIEWS = (
    *(Review(d, "float32", **EMPTY_ROWS) for d in (
        "alibi_is_a_float_bias", "gradients_match_reference", "matches_reference",
        "lse_matches_output", "per_sequence_equivalence", "empty_row_convention",
        "rows_without_keys_are_zero")),
    Review("padding_is_never_read", "float32", **MASKED_VALUES_READ),
)

UNSUPPORTED = "jax.nn.dot_product_attention has no {} (declared unsupported)"


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    if softcap > 0:
        raise NotImplementedError(UNSUPPORTED.format("softcap"))
    if v.shape[-1] != k.shape[-1]:
        raise NotImplementedError(UNSUPPORTED.format("value head size other than the key's"))
    import jax
    import numpy as np
    import torch

    from attnzoo.survey.varlen_adapters import _flex

    jax.config.update("jax_enable_x64", True)
    if block_table is not None:
        k, v, cu_seqlens_k = _flex.gather_pages(k, v, block_table, seqused_k)
        seqused_k = None
    cu_q = [int(x) for x in cu_seqlens_q.tolist()]
    cu_k = [int(x) for x in cu_seqlens_k.tolist()]
    B = len(cu_q) - 1
    lens_q = [cu_q[b + 1] - cu_q[b] for b in range(B)]
    allocated = [cu_k[b + 1] - cu_k[b] for b in range(B)]
    used = allocated if seqused_k is None else [int(x) for x in seqused_k.tolist()]
    T, S = max(lens_q, default=0), max(allocated, default=0)
    Hq = q.shape[1]
    dtype = torch.empty(0, dtype=q.dtype).numpy().dtype

    def pad(x, cu, lens, width):  # packed (total, H, D) torch -> padded (B, width, H, D) NumPy
        x = x.detach().cpu().numpy()
        out = np.zeros((B, width, *x.shape[1:]), x.dtype)
        for b in range(B):
            out[b, :lens[b]] = x[cu[b]:cu[b] + lens[b]]
        return out

    def unpad(xp, cu, lens, total):  # padded (B, width, H, D) -> packed, rows no one owns 0
        xp = np.asarray(xp)
        out = torch.zeros(total, *xp.shape[2:], dtype=q.dtype)
        for b in range(B):
            out[cu[b]:cu[b] + lens[b]] = torch.from_numpy(np.array(xp[b, :lens[b]]))
        return out

    window = None
    if tuple(window_size) != (-1, -1):
        window = tuple(int(w) if w >= 0 else T + S for w in window_size)
    bias = None
    if alibi_slopes is not None:
        slopes = alibi_slopes.detach().cpu().numpy().astype(dtype)
        slopes = slopes.reshape((-1 if slopes.ndim == 2 else 1, Hq, 1, 1))
        i, j = np.arange(T)[:, None], np.arange(S)[None, :]
        bias = -slopes * np.abs(i - j).astype(dtype)  # (B|1, N, T, S), JAX's diagonal i

    def attend(qp, kp, vp):  # (out, lse) of the padded batch, JAX's own
        return jax.nn.dot_product_attention(
            qp, kp, vp, bias=bias, scale=softmax_scale, is_causal=causal,
            query_seq_lengths=np.array(lens_q, np.int32),
            key_value_seq_lengths=np.array(used, np.int32), local_window_size=window,
            return_residual=True)

    padded = (pad(q, cu_q, lens_q, T), pad(k, cu_k, allocated, S), pad(v, cu_k, allocated, S))
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        out_p, backward, lse_p = jax.vjp(attend, *padded, has_aux=True)

        def grads(g):  # the upstream gradient padded, JAX's vjp, its answers packed
            dq, dk, dv = backward(pad(g, cu_q, lens_q, T))
            return (unpad(dq, cu_q, lens_q, q.shape[0]),
                    unpad(dk, cu_k, allocated, k.shape[0]),
                    unpad(dv, cu_k, allocated, v.shape[0]))

        out = _vjp_function().apply(q, k, v, lambda: unpad(out_p, cu_q, lens_q, q.shape[0]),
                                    grads)
    else:
        out_p, lse_p = attend(*padded)
        out = unpad(out_p, cu_q, lens_q, q.shape[0])
    if not return_lse:
        return out
    lse = torch.full((Hq, q.shape[0]), -torch.inf, dtype=q.dtype)  # guard rows: -inf
    lse_p = np.asarray(lse_p)
    for b in range(B):
        lse[:, cu_q[b]:cu_q[b + 1]] = torch.from_numpy(np.array(lse_p[b, :lens_q[b]])).T
    return out, lse


@functools.cache
def _vjp_function():
    """A torch.autograd.Function whose forward is JAX's answer and whose backward is JAX's
    vjp (jax.vjp), so torch autograd reaches JAX's own gradients."""
    import torch

    class Vjp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, answer, grads):
            ctx.grads = grads
            return answer()

        @staticmethod
        def backward(ctx, g):
            return (*ctx.grads(g.contiguous()), None, None)

    return Vjp


__getattr__ = loader(DECLARATION, _attn_varlen)
