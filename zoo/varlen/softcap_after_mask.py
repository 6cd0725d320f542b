"""Softcap applied after the mask: a hidden key's −∞ becomes −cap and takes weight.

``tanh(−∞) = −1``, so capping masked scores turns them into ``−softcap``, a finite score that
softmax gives weight to: hidden keys leak into every row, and an empty row averages them.
"""

from zoo import Bug
from zoo.varlen.decoys.sequence_loop import SequenceLoop

BUG = Bug(
    id="varlen-softcap-after-mask",
    title="Softcap applied after the mask, so masked keys score -softcap instead of -inf",
    category="scores",
    symptom="silent",
    lesson="Cap the scores before adding the bias and the mask; a masked score must stay -inf.",
    source="",
    seen_in="https://github.com/onnx/onnx/issues/7865 (the ONNX spec and reference capped after "
            "the mask; fixed in https://github.com/onnx/onnx/pull/7867)",
    caught_by=(
        "matches_reference",
        "softcap_limit_and_order",
        "window_is_a_key_slice",
        "gradients_match_reference",
    ),
)


class Loop(SequenceLoop):
    def scores(self, s, keep, softcap, bias):
        if bias is not None:
            s = s + bias
        s = s.masked_fill(~keep, self.fill(s.dtype))
        if softcap > 0:
            s = softcap * (s / softcap).tanh()  # BUG: after the mask, -inf becomes -softcap
        return s


VARLEN = Loop()
