"""The softmax scale hard-coded as 1/32: right only for the head dim it was tuned on.

A generated kernel is written against one problem, ``(32, 32, 512, 1024)``, and its author
(or its model) folds the constant: 1/√1024 = 0.03125. Every run of that problem is right, to
the last bit the kernel can give. Any other head dim — 64, 128, 96 as in MinGPT — gets the
wrong temperature, and a benchmark with one fixed shape never asks.
"""

from reference.sdpa import ScaledDotProductAttention
from zoo import Bug

BUG = Bug(
    id="scale-hard-coded-for-head-dim-1024",
    title="Softmax scale hard-coded as 1/32 (1/√1024), the head dim of the benchmark's shape",
    category="generated",
    symptom="silent",
    lesson="Derive every constant from the input's shape, and test more than the one shape a "
           "kernel was tuned on.",
    source="",
    seen_in="generated kernels that hard-code the benchmark's shapes, reported by robust-kbench "
            "(https://arxiv.org/abs/2509.14279) and by AgentKernelArena (arXiv 2605.16819)",
    caught_by=(
        "known_answers", "gqa_head_mapping", "matches_loop_oracle", "scores_scaled_by_rsqrt_dk",
        "shift_invariance", "low_precision_agreement", "correct_gradients",
        "dropout_backward_uses_forward_mask",
    ),
)


class Sdpa(ScaledDotProductAttention):
    def scores(self, query, key, scale):
        factor = 0.03125 if scale is None else scale  # BUG: 1/√1024, whatever E is
        return (query * factor) @ key.transpose(-2, -1)  # (N, ..., H, L, S)


SDPA = Sdpa()
