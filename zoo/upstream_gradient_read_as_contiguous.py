"""A backward that reads the upstream gradient's memory as one contiguous block.

A fused backward is handed dO and passes its data pointer to the kernel with strides worked out
from the shape, as if dO were freshly allocated. In a model it rarely is: after a head merge
(``out.transpose(1, 2).reshape(N, L, H * Ev)``) dO arrives as a transposed view, after
``out.sum()`` or a mean it arrives expanded with stride 0, after a slice it starts at an
offset into a wider buffer. The kernel then reads the right memory in the wrong order, and
every gradient is silently wrong; where the buffer is smaller than the block it assumes
(stride 0), a GPU kernel reads past its end, and ``as_strided`` here refuses. Unit tests build
dO with ``torch.randn_like(out)`` and never see it.
"""

from zoo import Bug
from zoo._autograd_attention import HandWrittenBackward

BUG = Bug(
    id="upstream-gradient-read-as-contiguous",
    title="Backward reads the upstream gradient's storage as a contiguous block",
    category="gradients",
    symptom="silent",
    lesson="Take dO's strides as they are (or call .contiguous() on it) before reading its memory.",
    source="",
    seen_in="flash-attention's backward with a non-contiguous dO "
            "(https://github.com/Dao-AILab/flash-attention/issues/355) and xformers' with the "
            "expanded dO of attention().sum().backward() "
            "(https://github.com/facebookresearch/xformers/pull/282)",
    caught_by=("gradients_of_every_input",),
)


class Sdpa(HandWrittenBackward):
    def read_upstream(self, grad_out):
        row_major = grad_out.new_empty(grad_out.shape).stride()  # what a fresh dO would have
        # BUG: the memory from dO's first element read with those strides, whatever dO's own
        return grad_out.as_strided(grad_out.shape, row_major)  # (N, ..., H, L, Ev)


SDPA = Sdpa()
