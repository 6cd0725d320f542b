"""torch.compile(torch.nn.attention.flex_attention.flex_attention): the fused kernel.

The same conversions as :mod:`.flex`, around flex_attention wrapped once in torch.compile (the
first call of each shape compiles, so calls get a long time limit). Dynamo's recompile limit is
raised, so that no call falls back to the unfused eager path once many shapes have been seen;
nothing else is configured. On the CPU inductor's flex kernel takes float32 (and half types),
not float64, and offers inference only: no LSE, no backward (flex_attention's source: "CPU/MPS
support inference only, no LSE/backward yet"; inductor's CPU lowering refuses the LSE). Both are
declared unsupported, so the output is judged without them.
"""

from attnzoo.survey.varlen_adapters import Declaration, Review, loader
from attnzoo.survey.varlen_adapters.flex import API, BLOG, MASKED_VALUES_READ, SOURCE

DECLARATION = Declaration(
    name="flex-compiled", title="torch.compile(flex_attention)", distribution="torch",
    module="torch.nn.attention.flex_attention", docs=API,
    converts="as flex (eager), around torch.compile(flex_attention, fullgraph=True), with "
             "dynamo's recompile limit raised, so that no call silently runs the eager path.",
    causal_alignment="bottom-right", causal_alignment_docs=BLOG,
    empty_rows="zero", empty_rows_docs=API + "#torch.nn.attention.flex_attention.FlexKernelOptions",
    window_counting="inclusive", window_counting_docs=BLOG,
    # inductor's CPU flex kernel: "`torch.float`, `torch.float16` and `torch.bfloat16` are
    # supported in FlexAttention for CPU device" (torch/_inductor/kernel/flex/flex_cpu.py)
    dtypes=("float32",),
    dtypes_docs="https://github.com/pytorch/pytorch/blob/main/torch/_inductor/kernel/flex/"
                "flex_cpu.py",
    call_seconds=300.0,
    unsupported=("lse", "autograd"), unsupported_docs=SOURCE,
)

COMPILE = "https://docs.pytorch.org/docs/stable/generated/torch.compile.html"

# the survey's flagged detectors read against the documentation (docs/survey-varlen.md)

RECOMPILE = dict(
    kind="divergence", docs=COMPILE,
    says="with dynamic=None, the default, torch.compile detects dynamism and compiles a more "
         "dynamic kernel upon recompile, the same computation.",
    note="the first shape compiles and is right; the second shape's recompile, with symbolic "
         "sizes, generates C++ that g++ rejects (error: 'cur_qSplitSize8' (or "
         "'cur_kvSplitSize9') was not declared in this scope), when the mask_mod reads a "
         "captured per-token tensor, as the blog's document mask does; later calls can fail "
         "in lowering instead (RuntimeError: unbacked_bindings). A plain causal mask_mod "
         "recompiles fine, and dynamic=False compiles every shape (the flex-compiled-static "
         "row) (checked on torch 2.13.0).",
    reproduce="""
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
flex = torch.compile(flex_attention)
for n in (13, 19):  # the second length recompiles with dynamic shapes
    q = torch.randn(1, 2, n, 8)
    doc = torch.zeros(n, dtype=torch.int32)  # one document: the blog's document mask
    mask = create_block_mask(lambda b, h, q_idx, kv_idx: doc[q_idx] == doc[kv_idx], 1, None,
                             n, n, device="cpu")
    print(n, flex(q, q, q, block_mask=mask).shape)
# 13 torch.Size([1, 2, 13, 8]), then for 19: InductorError ... CppCompileError:
# error: 'cur_qSplitSize8' was not declared in this scope
""")

NO_KEYS = dict(
    kind="divergence", docs=API,
    says="key is (B, Hkv, S, E) and the output (B, Hq, L, Ev); a row that every key is masked "
         "from gives 0 (fully masked rows are 0, not NaN, since "
         "https://github.com/pytorch/pytorch/pull/131552).",
    note="a sequence with no query and no key, passed alone (L = S = 0), fails in lowering: "
         "IndexError 'index is out of bounds for dimension with size 0' where the mask_mod "
         "reads its (empty) per-token tensor. Worse, with queries but no key (S = 0) the "
         "compiled kernel kills the process with SIGFPE, with or without a block mask, static "
         "or dynamic (the script below; the survey's detectors stopped at an earlier refusal "
         "before sending that call) (checked on torch 2.13.0).",
    reproduce="""
import torch
from torch.nn.attention.flex_attention import flex_attention
q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 0, 8)  # three queries, no key
torch.compile(flex_attention, dynamic=False)(q, k, k)  # the process dies: Floating point exception
""")

_compiled = {}  # the compiled flex_attention of this worker, by its dynamic setting

REVIEWS = (
    *(Review(d, "float32", **RECOMPILE) for d in (
        "alibi_is_a_float_bias", "matches_reference", "decode_matches_prefill",
        "gqa_with_every_feature", "page_placement_invariance", "per_sequence_equivalence",
        "softcap_limit_and_order", "window_is_a_key_slice", "causal_diagonal_convention",
        "empty_row_convention", "rows_without_keys_are_zero", "window_counting_convention")),
    Review("padding_is_never_read", "float32", **MASKED_VALUES_READ),
)


def compiled(dynamic):
    """torch.compile(flex_attention, fullgraph=True, dynamic=dynamic), once per worker."""
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    if dynamic not in _compiled:
        torch._dynamo.config.recompile_limit = 10_000
        _compiled[dynamic] = torch.compile(flex_attention, fullgraph=True, dynamic=dynamic)
    return _compiled[dynamic]


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    from attnzoo.survey.varlen_adapters import _flex

    return _flex.attend(compiled(None), q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
                        block_table, softmax_scale, causal, window_size, softcap, alibi_slopes,
                        return_lse)


__getattr__ = loader(DECLARATION, _attn_varlen)
