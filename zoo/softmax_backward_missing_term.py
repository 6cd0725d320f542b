"""A hand-written softmax backward that keeps only the diagonal of the Jacobian.

The softmax Jacobian is diag(p) − p pᵀ, so the gradient of the scores is
dS = P ⊙ (dP − rowsum(P ⊙ dP)). Written by hand, the second term is the one that goes missing:
dS = P ⊙ dP reads like "the chain rule through an element-wise exp", which softmax is not. The
forward is untouched, so every output test passes and training still runs; the gradient now
pushes all the scores of a row up together (its rows no longer sum to zero), although adding a
constant to a row changes nothing, and Q and K learn from a gradient that is not the loss's.
"""

from zoo import Bug
from zoo._autograd_attention import HandWrittenBackward

BUG = Bug(
    id="softmax-backward-missing-term",
    title="Hand-written softmax backward drops −P·rowsum(P ⊙ dP)",
    category="gradients",
    symptom="silent",
    lesson="The softmax backward is dS = P ⊙ (dP − rowsum(P ⊙ dP)); check a hand-written "
           "backward with torch.autograd.gradcheck.",
    source="seed 003 · Зачем делить на √d_k: «Градиент по оценке z_i равен "
           "p_i(g_i − Σ_j p_j g_j)»",
    seen_in="custom autograd Functions and fused-attention exercises that derive the softmax "
            "gradient by hand and treat softmax as an element-wise function",
    caught_by=("correct_gradients",),
)


class Sdpa(HandWrittenBackward):
    def grad_scores(self, weights, grad_weights):
        return weights * grad_weights  # BUG: drops - P * rowsum(P * dP), the -p pᵀ of the Jacobian


SDPA = Sdpa()
