"""Every 3-D mask taken for a (batch, L, S) mask, though under 4-D queries it is (heads, L, S).

Broadcasting aligns axes from the right, so a 3-D mask under (N, H, L, E) queries is one
(L, S) mask per head. Model code that assumes every 3-D mask is a per-example (N, L, S) mask
inserts a head axis — ``mask.unsqueeze(1)`` — and turns the per-head mask into a per-example
one: it fails to broadcast when H ≠ N, and silently applies head h's mask to example h when
H = N. The quick battery never sends a 3-D mask with 4-D queries.
"""

from zoo import Bug
from zoo.decoys.tiled_kernel import TiledSDPA

BUG = Bug(
    id="mask-3d-read-as-per-batch",
    title="A 3-D mask under 4-D queries is unsqueezed as (N, 1, L, S)",
    category="masking",
    symptom="crash",
    lesson="Let broadcasting align a mask from the right; never guess what its leading axis "
           "means from its rank.",
    source="",
    seen_in="attention wrappers in model code that expand 'a 3-D attention mask' with "
            "unsqueeze(1) before calling SDPA, where torch reads (H, L, S) as per head",
    caught_by=("matches_loop_oracle", "mask_forms_agree"),
    depth="standard",
)


class Sdpa(TiledSDPA):
    def align_mask(self, attn_mask, query):
        if attn_mask.dim() == 3 and query.dim() == 4:
            return attn_mask.unsqueeze(1)  # BUG: (H, L, S) read as (N, 1, L, S)
        missing = query.dim() - attn_mask.dim()
        return attn_mask.reshape((1,) * max(missing, 0) + tuple(attn_mask.shape))


SDPA = Sdpa()
