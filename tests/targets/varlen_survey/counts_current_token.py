"""A fake varlen library whose window counts the query's own token, as HF/Mistral's
``sliding_window=W`` does (W keys, the contract's (W - 1, 0)), and declares so: no finding."""

from attnzoo.survey.varlen_adapters import Declaration
from reference.varlen import attn_varlen as contract

DOCS = "https://example.invalid/docs#sliding-window"
DECLARATION = Declaration(
    name="fake-counting", title="a fake library counting the current token",
    distribution="torch", module="torch", docs=DOCS, converts="nothing",
    causal_alignment_docs=DOCS, empty_rows_docs=DOCS,
    window_counting="counts-current-token", window_counting_docs=DOCS)


def attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, window_size=(-1, -1), **kw):
    own = tuple(w - 1 if w > 0 else w for w in window_size)  # W keys: W - 1 besides its own
    return contract(q, k, v, cu_seqlens_q, cu_seqlens_k, window_size=own, **kw)
