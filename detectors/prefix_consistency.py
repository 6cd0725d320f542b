"""Decoding token by token gives what the full causal forward gives.

A metamorphic relation that ties causal attention to generation: the output for token t depends
on tokens 0..t only, so running on the prefix X[:t+1] — or decoding token t alone as one query
against the keys and values cached so far, with no mask at all — must reproduce row t of the
full forward. Statistics taken over the whole sequence, a mask sized by the wrong axis or a
causal mask misaligned for a single query all break it. On long sequences the prefixes and
decode steps are those of :func:`~detectors.kit.positions.probed` (tile boundaries, both ends,
a seeded sample).
"""

from dataclasses import replace

from detectors.kit import expect
from detectors.kit.battery import Call
from detectors.kit.expect import plural
from detectors.kit.needs import ATTENTION, SELF_ATTENTION
from detectors.kit.positions import probed
from detectors.kit.specs import Spec

PROPERTY = "Row t of causal self-attention equals the prefix run on tokens 0..t and the one-query decode step t."
CLAUSES = ("C4", "S2")
ORACLE = "metamorphic"
NEEDS = {
    "prefix": SELF_ATTENTION,
    "decode": SELF_ATTENTION.but(functions=("causal_self_attention", "attention")),
    "chunk": ATTENTION.but(contracts=("sdpa",), keywords=("is_causal",)),  # bottom-right only
}


def decode_step(call, t, heads):
    """Query t against keys/values 0..t, no mask: the KV-cache decode step."""
    q, k, v = call.projections()  # (..., T, d_k), (..., T, d_k), (..., T, d_v)
    q, k, v = q[..., t:t + 1, :], k[..., :t + 1, :], v[..., :t + 1, :]
    if heads:
        lead = (q.shape[0] if q.ndim == 3 else 1, 1)
        q, k, v = (a.reshape(lead + a.shape[-2:]) for a in (q, k, v))
    spec = Spec(f"{call.name} decode {t}", q.shape, k.shape, v.shape)
    return Call(spec, q, k, v, name=spec.name)


def check(subject, battery):
    bottom_right = subject.uses("chunk") and subject.target.causal_alignment == "bottom-right"
    for call in battery.self_attention:
        with subject.trial(call):
            full = subject.self_attend(call)
            out = subject.expected(call)[0]
            with subject.case(call.name, full):
                expect.same_shape(full.out, out.shape)
            atol = subject.allowance(call, out)
            T = call.x.shape[-2]
            for t in probed(T, battery.seed, call.name, start=1):
                prefix = subject.self_attend(replace(call, x=call.x[..., :t, :].copy(),
                                                     name=f"{call.name} prefix {t}"))
                relation = (f"the prefix of {plural(t, 'token')} should reproduce the first "
                            + ("row" if t == 1 else f"{t} rows"))
                with subject.case(call.name, full, prefix, relation=relation):
                    expect.agree(full.out[..., :t, :], prefix.out, atol,
                                 names=(f"f(X)[..., :{t}, :]", f"f(X[..., :{t}, :])"))
            if subject.uses("decode"):
                for t in probed(T, battery.seed, call.name):
                    decode = decode_step(call, t, subject.heads_axis)
                    step = subject.attend(decode)
                    want = full.out[..., t:t + 1, :]
                    got = step.out.reshape(want.shape) if step.out.size == want.size else step.out
                    # two functions, each within its own allowance of the exact row: the step is
                    # an attention call, judged at the precision attention was measured to have
                    both = atol + subject.allowance(decode, out[..., t:t + 1, :])
                    with subject.case(call.name, full, step, relation=f"decoding token {t} against "
                                      f"the cached keys should give row {t}"):
                        expect.agree(want, got, both,
                                     names=(f"f(X)[..., {t}:{t + 1}, :]", f"decode step {t}"))
            if bottom_right:
                chunk_prefill(subject, call, full, atol)


def chunk_prefill(subject, call, full, atol):
    """Bottom-right alignment only: queries t0..T against keys 0..T with is_causal."""
    whole = call.as_attention()  # (N, 1, T, d) with is_causal
    q, k, v = whole.q, whole.k, whole.v
    T = q.shape[-2]
    t0 = T // 2
    spec = Spec(f"{call.name} chunk {t0}:{T}", q[..., t0:, :].shape, k.shape, v.shape,
                causal=True)
    chunk = subject.attend(Call(spec, q[..., t0:, :].copy(), k, v, name=spec.name))
    want = full.out[..., t0:, :]
    got = chunk.out.reshape(want.shape) if chunk.out.size == want.size else chunk.out
    relation = "a bottom-right causal chunk of queries should reproduce the last rows"
    with subject.case(call.name, full, chunk, relation=relation):
        expect.agree(want, got, atol, names=(f"f(X)[..., {t0}:, :]", f"f(chunk {t0}:{T})"))
