"""A hand-written backward that computes dV = P dO instead of Pᵀ dO.

O = P V, so dV = Pᵀ dO: each key collects the gradient of the queries that read it. Written
without the transpose, P dO is the product that "fits" whenever the shapes allow it, and in
causal self-attention they always do: P is (T, T) and dO is (T, Ev), so the gradient of V comes
back with the right shape, the forward is exact, and training runs on a gradient in which key j
receives what query j should have sent. Only when queries and keys differ in number (cross
attention, a prefix of cached keys) does P (L, S) @ dO (L, Ev) fail, and then the backward
raises a shape error.
"""

from zoo import Bug
from zoo._autograd_attention import HandWrittenBackward

BUG = Bug(
    id="backward-transposed-dv",
    title="Hand-written backward computes dV = P dO instead of Pᵀ dO",
    category="gradients",
    symptom="crash",
    lesson="dV = Pᵀ dO; test a backward with L ≠ S, where the missing transpose cannot "
           "hide behind square shapes.",
    source="",
    seen_in="custom autograd Functions and fused-attention exercises tested only on square "
            "self-attention (L = S), where the untransposed product has the right shape",
    caught_by=("correct_gradients",),
)


class Sdpa(HandWrittenBackward):
    def grad_value(self, weights, grad_out):
        return weights @ grad_out  # BUG: P dO, not Pᵀ dO: (..., L, S) @ (..., L, Ev) needs L == S


SDPA = Sdpa()
