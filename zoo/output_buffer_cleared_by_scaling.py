"""The output buffer is kept per shape, returned, and cleared only by the online softmax's
first rescale.

A streaming kernel keeps acc = Σ exp(s − m)·v and rescales it by exp(m_old − m_new) whenever
the running maximum grows. Before the first block m_old = −∞, so that rescale is a
multiplication by 0, and this kernel lets it stand in for zero-filling: its accumulator is an
output buffer kept per shape (no allocation per call, as with a captured CUDA graph) and
returned to the caller. While the buffer holds the kernel's own finite numbers, 0·x = 0 and
every answer is right. But the caller owns what it was handed: once it writes a NaN or an
infinity into an answer (an in-place residual add that overflowed, a masked_fill_ with −∞),
0·NaN = NaN, and the next call of that shape is poisoned.
"""

import torch

from zoo import Bug
from zoo.decoys.flash_tiled import FlashSDPA

BUG = Bug(
    id="output-buffer-cleared-by-scaling",
    title="The accumulator is the returned output buffer, cleared by multiplying it by 0",
    category="state",
    symptom="nan",
    lesson="Zero an accumulator by assignment, never by multiplying: 0·NaN and 0·∞ are NaN; "
           "and memory handed to the caller is the caller's, not the next call's workspace.",
    source="",
    seen_in="multiplying by zero in place of clearing, which leaves NaN and inf standing "
            "(https://github.com/NVIDIA/Megatron-LM/issues/130, "
            "https://github.com/pytorch/pytorch/issues/194442), in an output buffer reused "
            "from call to call whose stale contents reach the next answer "
            "(https://github.com/vllm-project/vllm/pull/37442)",
    caught_by=("answers_follow_values",),
)


class Sdpa(FlashSDPA):
    def _stream(self, blocks, dropout_p=0.0):
        m = l = acc = None
        for s, v in blocks:  # s (..., T_q, b) with -inf where forbidden, v (..., b, d_v)
            if m is None:
                m = torch.full((), -torch.inf, dtype=s.dtype, device=s.device)
                l = torch.zeros((), dtype=s.dtype, device=s.device)
                acc = self.buffer(s.shape[:-1] + v.shape[-1:], s)  # BUG: last call's answer
            m_new = torch.maximum(m, s.detach().amax(dim=-1, keepdim=True))
            shift = torch.where(torch.isneginf(m_new), 0.0, m_new)
            alpha = torch.exp(m - shift)  # 0 before the first block: meant to clear acc
            p = torch.exp(s - shift)  # (..., T_q, b)
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            kept = torch.nn.functional.dropout(p, dropout_p) if dropout_p > 0 else p
            acc = alpha * acc + kept @ v  # (..., T_q, d_v)
            m = m_new
        l = torch.where(l > 0, l, 1.0)
        return shift, l, acc

    def _attend(self, Q, K, V, mask, scale=None, bias=None, dropout_p=0.0, weights=True):
        out, w = super()._attend(Q, K, V, mask, scale, bias, dropout_p, weights)
        if out.requires_grad:  # training keeps its own tensors; the buffer is for inference
            return out, w
        buffer = self.buffer(out.shape, out)
        return buffer.copy_(out), w  # BUG: the buffer itself is handed out, and read next call

    def buffer(self, shape, like):
        """The output buffer for this shape, dtype and device: zeros when first made."""
        buffers = self.__dict__.setdefault("buffers", {})
        key = (tuple(shape), like.dtype, like.device)
        if key not in buffers:
            buffers[key] = torch.zeros(shape, dtype=like.dtype, device=like.device)
        return buffers[key]


SDPA = Sdpa()
