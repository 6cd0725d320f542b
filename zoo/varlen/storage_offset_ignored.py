"""Storage offset ignored: each tensor is read from the start of its storage.

The kernel is handed a tensor's storage and its strides but not its offset into that storage,
so a view that starts past the beginning (v in a cache that interleaves k and v, a batch's
later sequences sliced out of a larger one) is read from where its storage begins: v reads
k's slots, a slice reads the rows before it. Tensors made by ``randn`` start at offset 0.
"""

from zoo import Bug
from zoo.varlen.decoys.paged_tiles import PagedTiles

BUG = Bug(
    id="varlen-storage-offset-ignored",
    title="Each tensor read from the start of its storage: a view's storage offset is lost",
    category="layout",
    symptom="silent",
    lesson="A view's data begins at its storage offset (data_ptr() includes it); test with "
           "slices of larger buffers and interleaved caches.",
    source="",
    seen_in="https://github.com/torch-spyre/torch-spyre/issues/2906 (device ops of a paged "
            "attention backend read sliced KV-cache tensors from offset 0 of their storage, "
            "silently)",
    caught_by=(
        "matches_reference",
        "per_sequence_equivalence",
        "page_placement_invariance",
        "padding_is_never_read",
        "window_is_a_key_slice",
        "softcap_limit_and_order",
        "lse_matches_output",
        "gqa_with_every_feature",
        "gradients_match_reference",
    ),
)


class Tiles(PagedTiles):
    def operands(self, q, k, v):
        # BUG: the tensors' strides kept, their storage offsets dropped
        return tuple(t.as_strided(t.shape, t.stride(), 0) for t in (q, k, v))


VARLEN = Tiles()
