"""A hand-written backward that works in place, on buffers it made itself.

Fused backward kernels reuse memory: dP becomes dS where it lies, dQ and dK are accumulated into
workspaces with ``out=``. Here every in-place step writes into a tensor this backward allocated
— dP, computed fresh from dO and V, is turned into dS in place; dQ and dK are written into
buffers made for them and scaled there — and never into a tensor the forward saved or the
caller passed.
"""

import torch

from zoo import Decoy
from zoo._autograd_attention import HandWrittenBackward

DECOY = Decoy(
    id="backward-in-place-on-its-own-buffers",
    title="A backward computing dS, dQ and dK in place in buffers of its own",
    technique="the hand-written backward turns dP into dS in place (sub_, mul_) and writes dQ "
    "and dK with matmul(out=) into fresh workspaces scaled in place",
    why_correct="every in-place write lands in memory this backward allocated; the saved "
    "inputs and the incoming gradient are only read",
)


class InPlaceBackward(HandWrittenBackward):
    def grad_scores(self, weights, grad_weights):
        """dS = P ⊙ (dP − rowsum(P ⊙ dP)), in dP's own memory (dP was made for this call)."""
        rowsum = (weights * grad_weights).sum(dim=-1, keepdim=True)  # (..., L, 1)
        return grad_weights.sub_(rowsum).mul_(weights)  # (..., L, S)

    def grad_query_key(self, grad_scores, query, key, factor):
        """dQ = scale · dS K and dK = scale · dSᵀ Q, each in a workspace of its own."""
        grad_query = torch.empty(grad_scores.shape[:-1] + key.shape[-1:], dtype=key.dtype,
                                 device=key.device)  # (..., L, E)
        grad_key = torch.empty(grad_scores.shape[:-2] + key.shape[-2:], dtype=query.dtype,
                               device=query.device)  # (..., S, E)
        torch.matmul(grad_scores, key, out=grad_query).mul_(factor)
        torch.matmul(grad_scores.transpose(-2, -1), query, out=grad_key).mul_(factor)
        return grad_query, grad_key


SDPA = InPlaceBackward()
