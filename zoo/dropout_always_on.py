"""Dropout left on, at a fixed rate, whatever ``dropout_p`` says.

Attention dropout is usually written as ``F.dropout(weights, config.attn_pdrop)`` inside
``forward``. The functional form does not know whether the model is training: its ``training``
argument defaults to True, so unless the call passes ``training=self.training`` it drops weights
at evaluation too. Here the rate also comes from the configuration rather than from the
``dropout_p`` the caller passed, so even ``dropout_p=0`` gets 10 % of its weights zeroed. Every
call returns a different answer; each one is plausible, none is attention.
"""


import torch.nn.functional as F

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="dropout-always-on",
    title="Attention dropout always applied, at a fixed rate that ignores dropout_p",
    category="state",
    symptom="silent",
    lesson="Apply dropout only when asked (dropout_p > 0, or training=self.training): "
           "F.dropout trains by default.",
    source="",
    seen_in="modules that call torch.nn.functional.dropout in forward without "
            "training=self.training, so dropout stays on under model.eval(); a rate read from "
            "the model config instead of the function's dropout_p argument",
    caught_by=(
        "matches_loop_oracle", "output_is_weighted_values", "weights_are_distributions",
        "batch_consistency", "shift_invariance", "causality", "dropout_is_inverted", "determinism",
    ),
)


class Sdpa(ScaledDotProductAttention):
    attn_pdrop = 0.1  # the attention dropout rate of the model's configuration

    def weights(self, scores, dropout_p):
        weights = self.softmax(scores)  # (N, ..., H, L, S), empty rows are 0
        return F.dropout(weights, self.attn_pdrop)  # BUG: always on, ignores dropout_p

SDPA = Sdpa()
