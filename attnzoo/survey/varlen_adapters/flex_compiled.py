"""torch.compile(torch.nn.attention.flex_attention.flex_attention): the fused kernel.

The same conversions as :mod:`.flex`, around flex_attention wrapped once in torch.compile (the
first call of each shape compiles, so calls get a long time limit). Dynamo's recompile limit is
raised, so that no call falls back to the unfused eager path once many shapes have been seen;
nothing else is configured. On the CPU inductor's flex kernel takes float32 (and half types),
not float64, and offers inference only: no LSE, no backward. Those calls raise, as the library
does, and are reported as it answers.
"""

from attnzoo.survey.varlen_adapters import Declaration, loader
from attnzoo.survey.varlen_adapters.flex import API, BLOG

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
)

_compiled = []  # the one compiled flex_attention of this worker


def _attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, max_seqlen_k,
                 seqused_k=None, block_table=None, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    from attnzoo.survey.varlen_adapters import _flex

    if not _compiled:
        torch._dynamo.config.recompile_limit = 10_000
        _compiled.append(torch.compile(flex_attention, fullgraph=True))
    return _flex.attend(_compiled[0], q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
                        block_table, softmax_scale, causal, window_size, softcap, alibi_slopes,
                        return_lse)


__getattr__ = loader(DECLARATION, _attn_varlen)
