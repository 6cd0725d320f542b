"""A backward that stores a gradient in the memory of an input it saved.

The tensors a forward saves for its backward are the caller's own, not copies. A kernel that
spares an allocation by writing dQ into the query's memory once dK no longer needs it — as fused
kernels do with their own scratch — returns exactly the right gradients, and leaves the
caller's query holding dQ. A kernel writes through the tensor's pointer, so autograd's version
counter does not move and nothing raises. The gradients are right; the caller's tensor is wrong
for its next use (a second loss, a recompute, a logged value). In float64, gradcheck's
reentrancy test sees it (a second backward reads the overwritten query); at the precision such a
kernel runs in, bfloat16 or float16, there is no gradcheck, and only the arguments read back
after the backward show it.
"""

from zoo import Bug
from zoo._autograd_attention import HandWrittenBackward

BUG = Bug(
    id="backward-writes-into-its-inputs",
    title="The backward writes dQ into the query the caller passed",
    category="gradients",
    symptom="silent",
    lesson="A backward owns its gradients and its scratch, never the tensors it saved: write "
           "a result into fresh memory, not into an input the caller still holds.",
    source="",
    seen_in="Liger-Kernel's SwiGLU backward, which writes its gradients into the memory of its "
            "saved inputs to spare allocations (https://github.com/linkedin/Liger-Kernel/"
            "issues/254); Apex's fused softmax backward, which overwrites the incoming "
            "gradient (https://github.com/NVIDIA/apex/issues/1430)",
    caught_by=("input_immutability",),
)


class Sdpa(HandWrittenBackward):
    def grad_query_key(self, grad_scores, query, key, factor):
        grad_key = grad_scores.transpose(-2, -1) @ query * factor  # (..., S, E), Q still whole
        # BUG: dQ stored in the caller's query once dK no longer needs it, written as a
        # kernel writes through the tensor's pointer (.data: autograd's version is not moved)
        grad_query = query.data.copy_(grad_scores @ key * factor)  # (..., L, E)
        return grad_query, grad_key


SDPA = Sdpa()
