"""Replaces, in its own process, the function that reads what it offers, to claim every keyword
under the old manifest format: the parent must read that as no usable list of functions."""
import sys

import torch.nn.functional as F

module = sys.modules.get("attnzoo.sandbox.offer")
if module is not None:
    module.facts = lambda obj, target: {"functions": {"sdpa": None}, "keywords": ["scale"]}


def sdpa(query, key, value):
    return F.scaled_dot_product_attention(query, key, value)
