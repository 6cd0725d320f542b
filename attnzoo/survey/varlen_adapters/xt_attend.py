"""x-transformers' ``Attend`` (x_transformers.attend), its own softmax path (flash=False), with
its ``AlibiPositionalBias`` (x_transformers.x_transformers) as the ALiBi bias.

Attend has no packing on the CPU (``flash_pack_seq`` hands a packed batch to flash-attn's CUDA
varlen kernel), so the adapter makes one Attend call per sequence, a batch of one in the
(batch, heads, tokens, dim) layout x-transformers' ``Attention`` passes, and writes the
sequence's rows back; the guard rows of q past ``cu_seqlens_q[-1]`` belong to no sequence and
come back 0. What it converts:

- layout: a sequence's packed rows to (1, H, s, D) and back; its keys are the first
  ``seqused_k[b]`` (else all) of its span; a paged cache is gathered by :func:`._flex.packed`,
  so page placement tests the adapter, not the library;
- group sharing: Attend tiles key/value heads (``repeat('b kvh n d -> b (r kvh) n d')``: its
  query head p reads key/value head p mod Hk), the contract groups them (head h reads h // g);
  query heads, and their ALiBi slopes, are reordered so that each reads the contract's
  key/value head, and the output's heads put back;
- causal: Attend's ``causal`` flag, its own bottom-right ``create_causal_mask``;
- the window: Attend has none of its own; it is written as Attend's boolean ``mask`` (True =
  attend), both ends included as the contract counts them;
- softcap: Attend's ``softclamp_logits`` with ``logit_softclamp_value``; the scale: its
  ``scale``;
- ALiBi: the contract's slopes passed to ``AlibiPositionalBias(heads, slopes=...)``, its
  documented argument, whose bias ``-slope·|j - (i + sk - sq)|`` goes to Attend's ``attn_bias``
  as x-transformers' ``Attention`` passes it; per-batch slopes, one bias module per sequence
  (https://github.com/lucidrains/x-transformers/blob/main/x_transformers/x_transformers.py).

Attend adds ``attn_bias`` before it soft-clamps; the adapter leaves that order as it is.
``max_seqlen_q``/``max_seqlen_k`` are sizes the library needs no hint of. Attend returns no LSE,
and computes its softmax in float32 whatever the input's dtype: ``return_lse`` is declared
unsupported and float64 is not among its dtypes; both raise NotImplementedError.
"""

from attnzoo.survey.varlen_adapters import Declaration, Review, loader

REPO = "https://github.com/lucidrains/x-transformers"
ATTEND = REPO + "/blob/main/x_transformers/attend.py"
ALIBI = REPO + "/blob/main/x_transformers/x_transformers.py"

DECLARATION = Declaration(
    name="xt-attend", title="x-transformers Attend(flash=False) with AlibiPositionalBias",
    distribution="x-transformers", module="x_transformers.attend", docs=REPO,
    converts="one Attend call per sequence (Attend has no packing of its own on the CPU), "
             "(1, H, s, D) and back, guard rows 0; query heads and slopes reordered so that "
             "Attend's tiled key/value sharing reads the contract's grouped heads; the window "
             "as Attend's boolean mask (it has no window); the contract's ALiBi slopes into "
             "AlibiPositionalBias(slopes=...) whose bias is Attend's attn_bias; causal, scale "
             "and softclamp_logits are Attend's own; the paged cache is gathered by the "
             "adapter, so page placement tests the adapter, not the library.",
    # create_causal_mask(i, j) = ones(i, j).triu(j - i + 1): the last query sees every key
    causal_alignment="bottom-right", causal_alignment_docs=ATTEND,
    # "for a row that is entirely masked out, should zero out the output of that row token"
    empty_rows="zero", empty_rows_docs=ATTEND,
    # no window of its own: the adapter's mask keeps both ends, and Attend masks where it is False
    window_counting="inclusive", window_counting_docs=ATTEND,
    # softmax_fn = partial(F.softmax, dim=-1, dtype=torch.float32): float64 is attended in
    # float32; forward returns (out, Intermediates), which holds no logsumexp
    dtypes=("float32",), dtypes_docs=ATTEND,
    unsupported=("lse",), unsupported_docs=ATTEND,
)

# the survey's flagged detectors read against x-transformers' source, its documentation
# (docs/survey-varlen.md)

CAUSAL_EMPTY_ROWS = dict(
    kind="divergence", docs=ATTEND,
    says="Attend zeroes the output of a row that is entirely masked out ('for a row that is "
         "entirely masked out, should zero out the output of that row token'); its causal mask "
         "create_causal_mask(i, j) = ones(i, j).triu(j - i + 1) aligns the last query with the "
         "last key.",
    note="only rows that the mask argument empties are zeroed: with causal=True and more "
         "queries than keys, the first sq - sk queries see no key, every score is "
         "-finfo.max, and the row is the mean of the sequence's values (its gradient reaches "
         "every value). Rows that see a key follow bottom-right (on the convention probe, "
         "within 2.1e-7 of the reference; top-left is off by 2.6). The SDPA survey's xt-attend "
         "row reviews the same behaviour. Checked on x-transformers 2.31.10.",
    reproduce="""
import torch
from x_transformers.attend import Attend
torch.manual_seed(0)
q, k, v = torch.randn(1, 1, 3, 8), torch.randn(1, 1, 2, 8), torch.randn(1, 1, 2, 8)
out, _ = Attend(causal=True)(q, k, v)  # bottom-right: query 0 sees no key
print(torch.allclose(out[0, 0, 0], v[0, 0].mean(0)))  # True: the mean of the values, not 0
mask = torch.ones(1, 1, 3, 2, dtype=torch.bool)
mask[..., 0, :] = False  # the same row emptied by the mask instead
print(Attend()(q, k, v, mask=mask)[0][0, 0, 0].abs().max())  # tensor(0.): zeroed
""")

BIAS_THEN_CAP = dict(
    kind="convention", docs=ATTEND,
    says="Attend.forward adds attn_bias to the scaled scores and then soft-clamps them "
         "(sim = sim + attn_bias; sim = softclamp(sim, logit_softclamp_value)): the cap "
         "bounds score plus bias, where the contract caps the score and adds ALiBi after.",
    note="with softcap and ALiBi together (the MQA and GQA cases with every feature) the "
         "output is tanh((s + bias)/c)·c's within 3.5e-7 and differs from the contract's by up "
         "to 1.3; with either alone it is the reference's. FlashInfer orders them so too "
         "(docs/varlen.md). Checked on x-transformers 2.31.10.",
    reproduce="""
import torch
from x_transformers.attend import Attend
from x_transformers.x_transformers import AlibiPositionalBias
torch.manual_seed(0)
q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
bias = AlibiPositionalBias(heads=2, slopes=[0.5, 0.25])(4, 4)  # (2, 4, 4)
out, _ = Attend(softclamp_logits=True, logit_softclamp_value=1.0)(q, k, v, attn_bias=bias)
s = q @ k.transpose(-1, -2) * 8 ** -0.5
print((out - torch.tanh(s + bias).softmax(-1) @ v).abs().max())  # tensor(0.): bias, then cap
print((out - (torch.tanh(s) + bias).softmax(-1) @ v).abs().max())  # 0.1953: not cap, bias
""")

NO_KEYS = dict(
    kind="divergence", docs=ALIBI,
    says="AlibiPositionalBias.forward(i, j) is the bias of i queries against j keys, the last "
         "query at the last key (seq_arange = arange(j - i, j)); a bias built once is cached "
         "and sliced for later calls, self.bias[..., -i:, -j:].",
    note="with j = 0 keys the slice -0: is the whole key axis, so after an earlier, larger call "
         "the module returns the cached (heads, i, j') bias and Attend's sim + attn_bias fails "
         "('the size of tensor a (0) must match the size of tensor b (3)'); with no cache, the "
         "same call raises in einx, which solves no zero-sized axis. The battery's case of "
         "ALiBi on rows that see no key (a sequence with queries and no key) meets it; the "
         "adapter shares one bias module across sequences, as a model shares it across steps. "
         "Checked on x-transformers 2.31.10.",
    reproduce="""
from x_transformers.x_transformers import AlibiPositionalBias
alibi = AlibiPositionalBias(heads=2)
print(alibi(3, 5).shape)  # torch.Size([2, 3, 5]): built, and cached
print(alibi(2, 0).shape)  # torch.Size([2, 2, 5]), not [2, 2, 0]: bias[..., -2:, -0:]
try:
    AlibiPositionalBias(heads=2)(2, 0)  # without the cache
except Exception as e:  # einx solves no zero-sized key axis
    print(type(e).__name__)
""")

# matches_reference and gradients_match_reference stop at the causal case; later ones differ too
BOTH = dict(CAUSAL_EMPTY_ROWS, note=CAUSAL_EMPTY_ROWS["note"] + " The MQA and GQA cases with "
            "every feature differ as well, by the bias-then-cap order (softcap_limit_and_order's "
            "review); every other case of the battery is within 1.5e-5 of the reference, "
            "gradients included.")

REVIEWS = tuple(
    Review(detector, "float32", **review)
    for detector, review in (("matches_reference", BOTH),
                             ("gradients_match_reference", BOTH),
                             ("window_is_a_key_slice", CAUSAL_EMPTY_ROWS),
                             ("causal_diagonal_convention", CAUSAL_EMPTY_ROWS),
                             ("empty_row_convention", CAUSAL_EMPTY_ROWS),
                             ("rows_without_keys_are_zero", CAUSAL_EMPTY_ROWS),
                             ("softcap_limit_and_order", BIAS_THEN_CAP),
                             ("alibi_is_a_float_bias", NO_KEYS),
                             ("padding_is_never_read", NO_KEYS),
                             ("per_sequence_equivalence", NO_KEYS)))


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    import torch
    from x_transformers.attend import Attend
    from x_transformers.x_transformers import AlibiPositionalBias

    from attnzoo.survey.varlen_adapters._flex import packed

    if return_lse:
        raise NotImplementedError("xt-attend: Attend returns no logsumexp (declared "
                                  "unsupported: lse); call without return_lse")
    if q.dtype == torch.float64:
        raise NotImplementedError("xt-attend: Attend computes its softmax in float32 "
                                  "(it declares float32 only); use float32")
    k, v, cu_q, cu_k, used = packed(k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table)
    hq, hk = q.shape[1], k.shape[1]
    g = hq // hk
    # Attend's query head p reads key/value head p % hk: give it the contract's head that reads
    # that one, (p % hk)·g + p // hk; `back` puts the contract's order back
    order = torch.tensor([(p % hk) * g + p // hk for p in range(hq)])
    back = torch.argsort(order)
    wl, wr = window_size
    attend = Attend(causal=causal, scale=softmax_scale, flash=False,
                    softclamp_logits=softcap > 0,
                    **({"logit_softclamp_value": softcap} if softcap > 0 else {}))
    shared = None
    if alibi_slopes is not None and alibi_slopes.dim() == 1:
        shared = AlibiPositionalBias(heads=hq, slopes=alibi_slopes[order].tolist())

    pieces = []
    for b in range(len(cu_q) - 1):
        sq, sk = cu_q[b + 1] - cu_q[b], used[b]
        if sq == 0:
            continue
        qb = q[cu_q[b]:cu_q[b + 1]].transpose(0, 1)[order].unsqueeze(0)  # (1, Hq, sq, D)
        kb, vb = (t[cu_k[b]:cu_k[b] + sk].transpose(0, 1).unsqueeze(0) for t in (k, v))
        mask = None
        if wl >= 0 or wr >= 0:
            d = torch.arange(sq)[:, None] + (sk - sq)  # each query's aligned position
            j = torch.arange(sk)[None, :]
            mask = torch.ones(sq, sk, dtype=torch.bool)
            if wl >= 0:
                mask &= j >= d - wl
            if wr >= 0:
                mask &= j <= d + wr
            mask = mask[None, None]  # (1, 1, sq, sk), True = attend
        bias = None
        if alibi_slopes is not None:
            module = shared or AlibiPositionalBias(heads=hq, slopes=alibi_slopes[b][order].tolist())
            bias = module(sq, sk).to(q.dtype)  # (Hq, sq, sk)
        out, _ = attend(qb, kb, vb, mask=mask, attn_bias=bias)
        pieces.append(out[0][back].transpose(0, 1))  # (sq, Hq, Dv)
    dv = v.shape[-1]
    guard = q.shape[0] - cu_q[-1]  # rows of q that belong to no sequence
    pieces.append(q.new_zeros(guard, hq, dv))
    return torch.cat(pieces)


__getattr__ = loader(DECLARATION, _attn_varlen)
