"""A hand-written backward that forgets the score scale in dQ and dK.

The forward multiplies Q Kᵀ by 1/√E (or the ``scale`` passed in), so by the chain rule dQ and
dK carry the same factor: dQ = scale · dS K, dK = scale · dSᵀ Q. Derived by hand from
"S = Q Kᵀ", the factor is easy to drop. The forward is right; the gradients of Q and K point the
right way and are √E times too large (2.8× at E = 8, 11× at E = 128). Adam's normalisation hides
most of it, which is why it survives; SGD, gradient clipping and weight decay do not.
"""

from zoo import Bug
from zoo._autograd_attention import HandWrittenBackward

BUG = Bug(
    id="backward-missing-scale",
    title="Hand-written backward omits the 1/√E scale in dQ and dK",
    category="gradients",
    symptom="silent",
    lesson="Every factor of the forward appears in the backward: dQ = scale · dS K, "
           "dK = scale · dSᵀ Q.",
    source="seed 003 · Зачем делить на √d_k: «при делении на √d_k градиент к W_Q и W_K по "
           "правилу цепочки ещё и умножается на 1/√d_k»",
    seen_in="custom autograd Functions and hand-derived attention backward passes (fused-kernel "
            "exercises) that differentiate S = Q Kᵀ and apply the scale only in the forward",
    caught_by=("correct_gradients",),
)


class Sdpa(HandWrittenBackward):
    def grad_query_key(self, grad_scores, query, key, factor):
        grad_query = grad_scores @ key  # BUG: (..., L, E) without the forward's scale
        grad_key = grad_scores.transpose(-2, -1) @ query  # BUG: (..., S, E) without the scale
        return grad_query, grad_key


SDPA = Sdpa()
