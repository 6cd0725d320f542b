"""Paged tiles behind a launcher that makes q, k and v contiguous first.

The stop-gap a kernel that cannot read strides gets (flash-attention's #2666 did this for one
kernel before #2670 taught it the strides): the launcher copies every operand into a
contiguous tensor of its own, then the kernel reads offsets from the shape. The copy costs
memory and time, never correctness.
"""

from zoo import Decoy
from zoo.varlen.decoys.paged_tiles import PagedTiles

DECOY = Decoy(
    id="varlen-contiguous-copies",
    title="Contiguous copies of q, k and v before a kernel that assumes contiguity",
    technique="the paged-tiles kernel behind a launcher that calls .contiguous() on q, k and v "
    "(a differentiable copy), as flash-attention's dispatcher did for its head-dim-256 kernel",
    why_correct="a contiguous copy has the view's values at the offsets a shape-derived stride "
    "reads, so head-major views, fused projections, interleaved caches and storage offsets all "
    "come out as their values say",
)


class Copies(PagedTiles):
    def operands(self, q, k, v):
        return tuple(t.contiguous() for t in (q, k, v))


VARLEN = Copies()
