"""transformers' flex_attention_forward with torch's flex_attention run eagerly, uncompiled.

Converts what :mod:`attnzoo.survey.adapters.hf_flex` converts, and runs the call under
``torch.compiler.set_stance("force_eager")`` (torch's documented switch: "ignore all
torch.compile directives"), so transformers' ``torch.compile(flex_attention)`` runs as plain
``flex_attention``: torch's unfused reference implementation of the same semantics. Nothing of
transformers is replaced; the stance is the default again when the call returns.

Why beside ``hf-flex``: torch 2.13's CPU flex kernel re-traces ``score_mod`` with index tensors
of shapes (q, 1) and (1, kv), so transformers' chained ``score_mask[b][0][q][kv]`` indexes the
wrong axes and the compiled kernel writes outside its buffer (SIGABRT, "index out of bounds:
0 <= tmp8 < cur_qSplitSize", NaN rows). That crash hides what the function itself computes with
a mask; uncompiled, it runs, and its own semantics can be judged.
"""

from dataclasses import replace

from attnzoo.survey.adapters import _lazy, hf_flex

DECLARATION = replace(
    hf_flex.DECLARATION, name="hf-flex-eager",
    title="transformers flex_attention_forward (flex_attention uncompiled)",
    # the unfused path takes float64 and computes in it; backward on CPU it refuses
    # ("FlexAttention does not support backward on CPU"), as compiled, so autograd stays out
    unsupported=hf_flex.DECLARATION.unsupported - {"float64"}, dtypes=("float32", "float64"),
    call_seconds=30.0,  # no kernel to compile: the unfused path materialises the scores
)



def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    import torch

    with torch.compiler.set_stance("force_eager"):
        return hf_flex.forward(query, key, value, attn_mask, dropout_p, is_causal, scale,
                               enable_gqa)


__getattr__ = _lazy.loader(DECLARATION, _sdpa)
