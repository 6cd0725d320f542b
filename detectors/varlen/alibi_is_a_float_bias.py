"""ALiBi is the float bias −slope·|d − j| (V6): the target's answer equals the dense SDPA
reference given that bias, plus −∞ for hidden keys, as its float ``attn_mask``.

Differential against another path: reference/sdpa.py adds a float mask to the scores, so the
bias is written out here per sequence and head, from the clause, with slopes per head or per
batch row, at prefill, chunked prefill and decode (where a bias built over the query window
vanishes). Cases with a softcap are left to softcap_limit_and_order (SDPA has no cap).
"""

import math

import torch

from detectors.kit import varlen
from reference.sdpa import scaled_dot_product_attention as sdpa

PROPERTY = ("ALiBi equals the explicit float bias -slope·|i + sk - sq - j| added through the SDPA "
            "reference's float mask.")
CLAUSES = ("V6", "V7")
ORACLE = "differential"


def check(subject):
    for case in subject.cases():
        slopes = case.args.get("alibi_slopes")
        if slopes is None or case.args["softcap"] > 0:
            continue
        out, _ = subject.run(case)
        Hq, Hk = case.heads
        start = 0
        for b, (sq, sk) in enumerate(zip(case.lens_q, case.lens_k)):
            if sq == 0 or sk == 0:  # rows with no key: rows_without_keys_are_zero
                start += sq
                continue
            kb, vb = varlen.sequence_keys(case, b)  # (sk, Hk, D|Dv)
            row = (slopes[b] if slopes.dim() == 2 else slopes).double()  # (Hq,)
            shift = sk - sq if subject.alignment == "bottom-right" else 0
            d = torch.arange(sq)[:, None] + shift
            distance = (d - torch.arange(sk)[None, :]).abs().double()  # (sq, sk)
            keep = varlen.visible(sq, sk, case.args["causal"], case.args["window_size"],
                                  subject.alignment)
            bias = (-row[:, None, None] * distance).masked_fill(~keep, -math.inf)  # (Hq, sq, sk)
            q = case.q[start:start + sq].double().transpose(0, 1)[None]  # (1, Hq, sq, D)
            k = kb.double().repeat_interleave(Hq // Hk, dim=1).transpose(0, 1)[None]
            v = vb.double().repeat_interleave(Hq // Hk, dim=1).transpose(0, 1)[None]
            want = sdpa(q, k, v, attn_mask=bias[None],
                        scale=case.args.get("softmax_scale"))[0].transpose(0, 1)  # (sq, Hq, Dv)
            subject.same(out[start:start + sq], want, case,
                         relation=f"should equal SDPA with the ALiBi bias as a float mask "
                         f"(sequence {b})")
            start += sq
