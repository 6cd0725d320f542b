"""torch.compile(flex_attention, dynamic=False): the fused kernel, compiled for each shape.

The same as :mod:`.flex_compiled` but for ``dynamic=False``: torch.compile's default
(``dynamic=None``) recompiles the second shape it sees with symbolic sizes, and on the CPU that
recompile fails (flex-compiled's findings), so this row measures the fused kernel itself, one
static compile per shape, as torch.compile's documentation offers
(https://docs.pytorch.org/docs/stable/generated/torch.compile.html: ``dynamic=False`` never
generates dynamic kernels).
"""

from attnzoo.survey.varlen_adapters import Declaration, Review, loader
from attnzoo.survey.varlen_adapters.flex import API, BLOG, MASKED_VALUES_READ
from attnzoo.survey.varlen_adapters.flex_compiled import DECLARATION as DYNAMIC
from attnzoo.survey.varlen_adapters.flex_compiled import NO_KEYS, compiled

DECLARATION = Declaration(
    name="flex-compiled-static", title="torch.compile(flex_attention, dynamic=False)",
    distribution="torch", module="torch.nn.attention.flex_attention", docs=API,
    converts="as flex (eager), around torch.compile(flex_attention, fullgraph=True, "
             "dynamic=False), with dynamo's recompile limit raised: each shape compiled on its "
             "own, none run on the eager path.",
    causal_alignment="bottom-right", causal_alignment_docs=BLOG,
    empty_rows="zero", empty_rows_docs=DYNAMIC.empty_rows_docs,
    window_counting="inclusive", window_counting_docs=BLOG,
    dtypes=DYNAMIC.dtypes, dtypes_docs=DYNAMIC.dtypes_docs, call_seconds=DYNAMIC.call_seconds,
    unsupported=DYNAMIC.unsupported, unsupported_docs=DYNAMIC.unsupported_docs,
)

# the survey's flagged detectors read against the documentation (docs/survey-varlen.md)
REVIEWS = (
    Review("per_sequence_equivalence", "float32", **NO_KEYS),
    Review("padding_is_never_read", "float32", **MASKED_VALUES_READ),
)


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    from attnzoo.survey.varlen_adapters import _flex

    return _flex.attend(compiled(False), q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
                        block_table, softmax_scale, causal, window_size, softcap, alibi_slopes,
                        return_lse)


__getattr__ = loader(DECLARATION, _attn_varlen)
