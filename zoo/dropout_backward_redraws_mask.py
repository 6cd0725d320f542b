"""A backward that regenerates the dropout mask from the random state it finds, not the forward's.

A backward that does not keep the dropout mask must rebuild exactly the forward's: from the seed
the forward saved, or by restoring the random state before recomputing (what
``torch.utils.checkpoint`` does with ``preserve_rng_state=True``). Recompute from whatever state
the generator is in when the backward runs and the mask is a new draw: the loss is taken on one
sample and the gradients on another. The forward is right at every rate and every seed, and the
gradients point roughly the right way (both masks keep a share 1 − p), so training still runs —
worse, and differently from the same model without recomputation.
"""

from zoo import Bug
from zoo.decoys.dropout_seed_replayed import SeedReplayed

BUG = Bug(
    id="dropout-backward-redraws-mask",
    title="The backward draws a new dropout mask instead of replaying the forward's",
    category="gradients",
    symptom="silent",
    lesson="The backward of dropout uses the forward's mask: save it, or save the random state "
           "it was drawn from and restore it before recomputing.",
    source="",
    seen_in="recompute-in-backward helpers that do not restore the random state: "
            "guided-diffusion's checkpoint (https://github.com/openai/guided-diffusion/issues/"
            "167) and OLMo-core's preserve_rng_state=False (https://github.com/allenai/OLMo-core/pull/828)",
    caught_by=("dropout_backward_uses_forward_mask",),
)


class Sdpa(SeedReplayed):
    def replayed_seed(self, seed):
        return self.draw_seed()  # BUG: a new draw from torch's generator, not the forward's seed


SDPA = Sdpa()
