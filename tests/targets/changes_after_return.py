"""SDPA whose answer a background thread changes ATTNZOO_TEST_CHANGE_AFTER seconds (default
0.05) after the call returned, as an asynchronous copy or a reused stream buffer would: read
again right after the call, it is unchanged."""

import os
import threading
import time

import torch


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale, enable_gqa=enable_gqa)

    def later():
        time.sleep(float(os.environ.get("ATTNZOO_TEST_CHANGE_AFTER", "0.05")))
        with torch.no_grad():
            out.mul_(2.0)

    threading.Thread(target=later, daemon=True).start()
    return out
