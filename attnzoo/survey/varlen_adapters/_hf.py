"""The varlen call as transformers' attention functions take it: one call per sequence, batch
of one, with the mask ``transformers.masking_utils`` builds for it; imports torch and
transformers, so each adapter imports it inside the function that calls it.

transformers' ``*_attention_forward(module, query, key, value, attention_mask, …)`` takes
(batch, heads, length, head_dim) tensors and a mask the model built beforehand with
``masking_utils`` (https://huggingface.co/docs/transformers/attention_interface). This module
spells the contract in those terms, per sequence b (sq queries, sk keys):

- sequences: one call each, as a model with a cache of ``sk − sq`` tokens calls it: the query
  offset of ``create_causal_mask`` (``cache.get_query_offset``) is ``sk − sq``, the key length
  sk, the key offset 0. transformers' packed format (``position_ids`` restarting at 0) is
  causal self-attention only, with as many queries as keys (``packed_sequence_mask_function``'s
  docstring), and a left-padded batch would let a row with no key average the padding, so
  neither is used; a sequence with no query is not called; the guard rows of q get 0;
- the mask: the mask interface of the attention implementation
  (``ALL_MASK_ATTENTION_FUNCTIONS``), called with the arguments ``create_causal_mask`` (causal),
  ``create_sliding_window_causal_mask`` (causal with a window) or ``create_bidirectional_mask``
  (not causal) pass it; a left window without causal is the library's
  ``sliding_window_overlay`` given to ``create_bidirectional_mask`` as its
  ``and_mask_function``, which turns the mask's skip off and vmap on, as that function does;
- the window: ``sliding_window = window_size[0]``, the key count transformers' window has (it
  counts the current token; the adapter declares that counting, so the harness sends windows
  in it); transformers has no window bounded on the right but the causal mask, so a bounded
  right side is refused (declared ``window_right``);
- ALiBi: an additive bias, ``−slope·|d − j|`` per head, which is how transformers' ALiBi
  models spell it (MPT passes it as ``position_bias``); each adapter says where it goes;
- the paged cache: gathered by the adapter (``_flex.packed``), keys past ``seqused_k``
  dropped; page placement therefore tests the adapter, not the library;
- GQA: the module's ``num_key_value_groups`` = Hq // Hk, as a model sets it; the scale: the
  ``scaling`` keyword, ``head_dim ** -0.5`` by default, as every model sets it.
"""


class Refused(NotImplementedError):
    """A call that uses what the adapter declared the library cannot spell."""


def refuse_unsupported(declared, window_size, softcap, return_lse):
    """NotImplementedError for an argument the declaration says the library has no way to
    spell, never an argument silently dropped."""
    if "window_right" in declared and window_size[1] >= 0:
        raise Refused("transformers has no window bounded on the right (window_size[1] >= 0): "
                      "its sliding_window bounds the left side only")
    if "softcap" in declared and softcap > 0:
        raise Refused("transformers' sdpa_attention_forward refuses softcap")
    if "lse" in declared and return_lse:
        raise Refused("transformers' attention functions return no LSE")


def mask(implementation, sq, sk, causal, window_left, dtype):
    """The mask ``masking_utils`` builds for one sequence of a model whose cache holds
    ``sk − sq`` tokens: what ``create_causal_mask`` and its siblings pass to the mask
    interface of ``implementation`` ("sdpa" or "eager"); None where the library skips it."""
    from transformers import masking_utils as mu

    interface = mu.ALL_MASK_ATTENTION_FUNCTIONS[implementation]
    common = dict(batch_size=1, q_length=sq, kv_length=sk, q_offset=sk - sq, kv_offset=0,
                  attention_mask=None, dtype=dtype, device="cpu")
    window = window_left if window_left >= 0 else None
    if causal and window is None:  # create_causal_mask
        return interface(mask_function=mu.causal_mask_function, allow_is_causal_skip=True,
                         use_vmap=False, **common)
    if causal:  # create_sliding_window_causal_mask
        return interface(mask_function=mu.sliding_window_causal_mask_function(window),
                         allow_is_causal_skip=True, local_size=window, use_vmap=False,
                         **common)
    if window is None:  # create_bidirectional_mask
        return interface(mask_function=mu.bidirectional_mask_function,
                         allow_is_causal_skip=False, allow_is_bidirectional_skip=True,
                         use_vmap=False, **common)
    # create_bidirectional_mask with and_mask_function=sliding_window_overlay(window)
    return interface(mask_function=mu.and_masks(mu.bidirectional_mask_function,
                                                mu.sliding_window_overlay(window)),
                     allow_is_causal_skip=False, allow_is_bidirectional_skip=False,
                     use_vmap=True, **common)


def alibi_bias(slopes, b, sq, sk, dtype):
    """(1, Hq, sq, sk): ``−slope·|d − j|`` for sequence b, d = i + sk − sq, computed in
    float32 (float64 for float64) and given the inputs' dtype once, as the library takes it."""
    import torch

    work = torch.float64 if dtype == torch.float64 else torch.float32
    s = (slopes[b] if slopes.dim() == 2 else slopes).to(work)
    d = torch.arange(sq, dtype=work) + (sk - sq)
    j = torch.arange(sk, dtype=work)
    return (-s[:, None, None] * (d[:, None] - j[None, :]).abs())[None].to(dtype)


def attend(forward, declared, q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table,
           softmax_scale, causal, window_size, softcap, alibi_slopes, return_lse):
    """The varlen call, one ``forward(module, q, k, v, sq, sk, scaling, causal, window_left,
    softcap, bias)`` per sequence with (1, H, length, D) tensors, its (1, sq, Hq, Dv) answers
    concatenated and the guard rows 0."""
    import torch

    from attnzoo.survey.adapters import _hf
    from attnzoo.survey.varlen_adapters._flex import packed

    refuse_unsupported(declared, window_size, softcap, return_lse)
    k, v, cu_q, cu_k, used = packed(k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table)
    scaling = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    Hq, Dv = q.shape[1], v.shape[-1]
    pieces = []
    for b in range(len(cu_q) - 1):
        sq, sk = cu_q[b + 1] - cu_q[b], used[b]
        if sq == 0:
            continue
        qb, kb, vb = (t.transpose(0, 1).unsqueeze(0) for t in (
            q[cu_q[b]:cu_q[b + 1]], k[cu_k[b]:cu_k[b] + sk], v[cu_k[b]:cu_k[b] + sk]))
        module = _hf.Module(qb, kb, enable_gqa=True, dropout_p=0.0)
        module.is_causal = bool(causal)
        bias = None if alibi_slopes is None else alibi_bias(alibi_slopes, b, sq, sk, q.dtype)
        out = forward(module, qb, kb, vb, sq, sk, scaling, causal, window_size[0], softcap,
                      bias)
        pieces.append(out[0])  # (1, sq, Hq, Dv) → (sq, Hq, Dv)
    pieces.append(torch.zeros(q.shape[0] - cu_q[-1], Hq, Dv, dtype=q.dtype))  # guard rows
    return torch.cat(pieces)
