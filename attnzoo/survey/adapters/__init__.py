"""One thin adapter per implementation, each ``sdpa(query, key, value, attn_mask=None,
dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)`` with its ``DECLARATION``.

An adapter converts only what the library's API defines differently — the layout (transposes),
the mask convention, the array type — and never the library's math; its docstring says exactly
what it converts. The library is imported on the first call, in the sandbox worker, so reading
a declaration needs nothing installed and a library that crashes on import crashes the worker,
not the survey. So are the helpers that import torch (``_convert``, ``_hf``, ``_mha``): each
adapter imports them inside the function that calls them.
"""

import importlib

NAMES = (
    "torch_sdpa_math",
    "torch_sdpa_flash",
    "torch_mha_weights",
    "torch_mha_sdpa",
    "hf_sdpa",
    "hf_eager",
    "hf_flex",
    "hf_flex_eager",
    "timm_attention",
    "xt_attend",
    "xt_attend_flash",
    "jax_nn",
    "keras_numpy",
    "keras_torch",
)


def declarations():
    """Every adapter's declaration, in survey order: (module name, Declaration)."""
    return [(n, importlib.import_module(f"{__name__}.{n}").DECLARATION) for n in NAMES]


def locator(name):
    """The adapter's ``sdpa``; a name that is a file path (a test's fake library) is that
    file's."""
    return f"{name}:sdpa" if name.endswith(".py") else f"{__name__}.{name}:sdpa"
