"""The stand-in for the attention module Hugging Face's attention functions read attributes of.

transformers' ``*_attention_forward(module, query, key, value, attention_mask, …)`` reads
``module.num_key_value_groups`` (query heads per key/value head), ``module.is_causal`` and
``module.training``; nothing else of the module enters the computation.
"""

import torch


class Module(torch.nn.Module):
    def __init__(self, query, key, enable_gqa, dropout_p):
        super().__init__()
        groups = query.shape[1] // key.shape[1] if enable_gqa else 1
        self.num_key_value_groups = groups
        self.is_causal = False
        self.train(dropout_p > 0)
