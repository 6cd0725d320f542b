"""The split-KV path forgets the softcap: scores are never capped there.

Kernels keep several paths (prefill, split-KV decode, an FP32 fallback); a feature added to one
is easily missing from another, and a test that sends a cap only to the path that has it
passes.
"""

from zoo import Bug
from zoo.varlen.decoys.split_kv import SplitKV

BUG = Bug(
    id="varlen-softcap-dropped-on-split-path",
    title="The split-KV path ignores softcap",
    category="scores",
    symptom="silent",
    lesson="Send the cap through every path a kernel has; compare capped calls with a reference.",
    source="",
    seen_in="https://github.com/kekzl/imp/pull/688 (softcap silently dropped on one prefill "
            "path); https://github.com/vllm-project/vllm-metal/pull/666 (softcap hardcoded to 0)",
    caught_by=(
        "matches_reference",
        "softcap_limit_and_order",
        "gradients_match_reference",
    ),
)


class Split(SplitKV):
    def cap(self, s, softcap):
        return s  # BUG: the cap is never applied on this path


VARLEN = Split()
