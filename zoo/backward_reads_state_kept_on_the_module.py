"""A hand-written backward that reads the weights from one buffer on the module, reused by all.

A custom ``autograd.Function`` can save what its backward needs on ``ctx``, which travels with
each call's graph, or on the object that made the call. Kept in one buffer on the object, it
is whatever the most recent forward stored: a test that runs one forward and its backward at
once sees the right gradients, and a model that calls the same attention in two layers before
any backward trains the first layer with the second layer's weights. Every gradient check that
follows a forward with its own backward passes.
"""

from zoo import Bug
from zoo.decoys.workspace_slot_per_forward import WorkspaceSlots

BUG = Bug(
    id="backward-reads-state-kept-on-the-module",
    title="Backward reads the softmax weights from one module buffer that every forward overwrites",
    category="gradients",
    symptom="silent",
    lesson="Save what the backward needs with the graph (ctx.save_for_backward, or a slot its "
           "ctx names), never in one place on the module: other forwards come between a "
           "forward and its backward.",
    source="",
    seen_in="tiny-cuda-nn's PyTorch extension kept its forward buffers on the module instead of "
            "the autograd context, so calling forward twice before backward broke the gradients "
            "(https://github.com/NVlabs/tiny-cuda-nn/issues/39)",
    caught_by=("backward_follows_its_forward",),
)


class Sdpa(WorkspaceSlots):
    def stash(self, weights):
        self.workspace[0] = weights  # BUG: one buffer for every forward, the next overwrites it
        return 0

    def release(self, slot):
        pass  # the one buffer lives as long as the module


SDPA = Sdpa()
