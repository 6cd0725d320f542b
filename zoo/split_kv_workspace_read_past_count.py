"""Split-KV partials kept in a workspace; the merge reads every slot, not this call's splits.

A split-KV decoder writes each split's (o_i, m_i, l_i) into a workspace allocated for the most
splits it has needed so far, then a combine step reduces them. Looping the combine over the
workspace's slot count instead of this call's split count merges the partials a longer,
earlier sequence left behind: a cache of 200 keys served after one of 513 gets the last three
splits of the old cache mixed in. Called first, or only ever on one length, every answer is
exact; the answer depends on what was decoded before it.
"""

from zoo import Bug
from zoo.decoys.split_kv import SplitKV

BUG = Bug(
    id="split-kv-workspace-read-past-count",
    title="Split-KV combine loops over the workspace's slots, reading an earlier call's splits",
    category="state",
    symptom="silent",
    lesson="Bound every loop over a reused workspace by this call's count, never by the "
           "buffer's capacity; test a short call after a long one.",
    source="",
    seen_in="paged and split-KV decode kernels (vLLM's paged attention v2 and flash-decoding "
            "ports) whose reduce step must stop at the sequence's own partition count inside "
            "tmp_out/exp_sums/max_logits buffers sized for the longest sequence",
    # every detector whose own calls include a call after a larger one of the same width
    caught_by=("call_order_independence", "matches_loop_oracle", "shift_invariance",
               "empty_rows_are_zero", "low_precision_agreement", "correct_gradients"),
    depth="standard",
)


class Sdpa(SplitKV):
    def __init__(self):
        super().__init__()
        self.slots = []  # the workspace: one flat (o, m, l) per split, kept across calls

    def merge(self, parts):
        for i, (o, m, l) in enumerate(parts):  # this call's splits into slots 0 .. n-1
            if i == len(self.slots):
                self.slots.append(None)
            self.slots[i] = tuple(a.detach().flatten().clone() for a in (o, m, l))
        o, m, l = parts[0]
        stale = [tuple(a[:b.numel()].view(b.shape) for a, b in zip(slot, (o, m, l)))
                 for slot in self.slots[len(parts):]
                 if all(a.numel() >= b.numel() and a.dtype == b.dtype
                        for a, b in zip(slot, (o, m, l)))]
        return super().merge(parts + stale)  # BUG: every slot, not this call's len(parts)


SDPA = Sdpa()
