"""The fixed vocabulary an adapter uses to say what its library does not support.

A declaration is data: ``UNSUPPORTED`` (features from :data:`VOCABULARY`), ``DTYPES`` (what
the library computes in), ``REFUSES`` (messages with which the library refuses a call it does
not support). :func:`features` names the features a battery call uses, so the cases outside a
declaration can be set aside instead of being scored against the library.
"""

import importlib.metadata
from dataclasses import dataclass

VOCABULARY = {
    "rank_other_than_4": "inputs of rank other than 4: (N, H, L, E) only",
    "e_ne_ev": "value head size Ev different from query/key head size E",
    "bool_mask": "a boolean attn_mask",
    "float_mask": "a float (additive) attn_mask",
    "per_head_mask": "a mask that differs between heads (a head axis of size > 1)",
    "rectangular": "L != S (self-attention blocks take one token sequence)",
    "is_causal": "is_causal=True",
    "is_causal_rectangular": "is_causal=True with L != S",
    "scale": "an explicit scale",
    "gqa": "enable_gqa=True (fewer key/value heads than query heads)",
    "dropout": "dropout_p > 0",
    "autograd": "gradients through torch autograd",
    "float64": "float64 inputs",
}


@dataclass(frozen=True)
class Declaration:
    """What one implementation is, where it comes from and what it does not offer."""

    name: str  # the survey's row: "torch-sdpa-math"
    title: str  # what a reader recognises: "torch.nn.functional.scaled_dot_product_attention"
    distribution: str  # the PyPI distribution whose version is reported
    module: str  # what the worker imports when it loads the adapter
    unsupported: frozenset = frozenset()
    dtypes: tuple = ("float32", "float64")
    refuses: tuple = ()  # messages of a run-time refusal ("No available kernel")
    causal_alignment: str = "top-left"  # where is_causal puts the diagonal when L != S
    call_seconds: float = 10.0  # time limit per call (compiling kernels need more)
    install: str = "pip install -e '.[survey]'"  # how to get the library, for the skip line
    docs: str = ""  # where the library documents the function

    def __post_init__(self):
        unknown = set(self.unsupported) - set(VOCABULARY)
        if unknown:
            raise ValueError(f"{self.name}: unknown capability {sorted(unknown)[0]!r}; "
                             f"use one of {', '.join(VOCABULARY)}")
        if "float64" in self.unsupported and "float64" in self.dtypes:
            raise ValueError(f"{self.name}: declares float64 unsupported but lists it in dtypes")

    def version(self):
        """The installed version of the distribution, or None when it is not installed."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


def features(call):
    """The vocabulary features a battery call uses (a Call from detectors.kit.battery)."""
    used = set()
    if call.q.ndim != 4:
        used.add("rank_other_than_4")
    if call.q.shape[-1] != call.v.shape[-1]:
        used.add("e_ne_ev")
    mask = call.mask if call.mask is not None else call.bias
    if call.mask is not None:
        used.add("bool_mask")
    if call.bias is not None:
        used.add("float_mask")
    if mask is not None and mask.ndim >= 3 and mask.shape[-3] > 1:
        used.add("per_head_mask")
    if call.q.shape[-2] != call.k.shape[-2]:
        used.add("rectangular")
    if call.causal:
        used.add("is_causal")
        if call.q.shape[-2] != call.k.shape[-2]:
            used.add("is_causal_rectangular")
    if call.scale is not None:
        used.add("scale")
    if call.gqa:
        used.add("gqa")
    return used


def supported(declaration, call):
    """Whether a battery call stays inside what the implementation declares it offers."""
    return not (features(call) & declaration.unsupported)
