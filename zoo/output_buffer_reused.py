"""The output is written into a workspace kept between calls, and a view of it is returned.

Allocating the output on every call is what a kernel launcher or an inference engine tries to
avoid: on its inference path it keeps one buffer, grown to the largest call so far, writes
each answer into the front of it and hands back a view. Every answer is right when it is
returned, so every test that reads the answer straight away passes; but the caller's tensor
now shares memory with the next call's answer. Keep the output of layer 1 while layer 2
runs, or a batch's attention while the next batch runs, and it has silently become someone
else's numbers.
"""

import torch

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="output-buffer-reused",
    title="The output is a view of a workspace that the next call overwrites",
    category="state",
    symptom="silent",
    lesson="Return memory the caller owns: a buffer reused across calls must be copied out "
           "(or documented, as CUDA graphs document their static outputs).",
    source="",
    seen_in="decoders replaying CUDA graphs that return the graph's static output tensor "
            "without a clone (PyTorch's CUDA-graph notes warn that replays overwrite it), "
            "and kernel wrappers that keep a preallocated output workspace between calls",
    caught_by=("answers_stay_as_returned",),
)


class Sdpa(ScaledDotProductAttention):
    workspace = torch.empty(0)  # grown to the largest output seen (set per instance on growth)

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        out = super().__call__(query, key, value, attn_mask, dropout_p, is_causal, scale,
                               enable_gqa)  # (N, ..., H, L, Ev)
        if out.requires_grad:  # training keeps its own tensors; the workspace is for inference
            return out
        ws = self.workspace
        if ws.numel() < out.numel() or ws.dtype != out.dtype or ws.device != out.device:
            ws = self.workspace = torch.empty(out.numel(), dtype=out.dtype, device=out.device)
        answer = ws[:out.numel()].view(out.shape)  # (N, ..., H, L, Ev), in the workspace
        answer.copy_(out)
        return answer  # BUG: a view of memory the next call writes into


SDPA = Sdpa()
