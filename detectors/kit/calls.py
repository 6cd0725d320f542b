"""What a detector asks of an implementation, and what comes back, as plain data.

A :class:`Request` is made of NumPy float64 (or bool) arrays and the dtype, device and layout to
cast them to; a :class:`Result` holds the answer as NumPy arrays with the dtype it had. Where and
how a request is run is the application's business (``attnzoo.sandbox``), not the detectors'.
"""

from dataclasses import dataclass, field

import numpy as np

ARG_NAMES = {
    "causal_mask": ("T",),
    "softmax": ("x",),
    "attention": ("Q", "K", "V", "mask"),
    "causal_self_attention": ("X", "W_q", "W_k", "W_v"),
    "sdpa": ("query", "key", "value"),
}
RETURNS = {"causal_mask": 1, "softmax": 1, "attention": 2, "causal_self_attention": 2, "sdpa": 1}


ANY_INPUT = "an input"  # a read-only NumPy call raised, and no one input alone made it raise

@dataclass
class Request:
    fn: str  # a lesson function name, or "sdpa"
    args: tuple  # NumPy arrays (float64 or bool) and ints
    kwargs: dict = field(default_factory=dict)  # SDPA keywords
    dtype: str = "float64"  # float arguments are cast to this before the call
    device: str = "cpu"
    grad: object = None  # an upstream gradient for the first output: ask for input gradients
    # None: the gradients of sum(out * grad); one of detectors.kit.memory.LAYOUTS: grad is
    # handed to the backward itself (out.backward(grad)), laid out so (after a head merge dO
    # arrives transposed, after out.sum() or a mean over queries expanded, after a slice at an
    # offset)
    grad_layout: str | None = None
    # the arguments that require grad, by name (a keyword such as "attn_mask" among them);
    # None: every float positional argument
    wrt: tuple | None = None
    gradcheck: bool = False  # run torch.autograd.gradcheck on the call instead
    # seed the RNGs before the call; None leaves them as the last call left them, so calls in
    # a row without a seed draw in sequence, as a training loop's steps do
    seed: int | None = None
    # how every array argument lies in memory, its values the same: one of LAYOUTS as well
    layout: str = "contiguous"
    keep: bool = False  # keep the answer as returned, to be read again after later calls
    # a caller's actions on a call made with keep (its handle, Result.kept), before this call:
    refill: int | None = None  # call with that call's argument objects, refilled in place
    overwrite: int | None = None  # first write NaN into that call's floating-point answers
    inputs: bool = False  # read every argument back after the call: did the call change it?
    # with ``inputs``: NumPy arguments read-only, torch ones watched by their version counter,
    # so a write put back before the call returns is seen as well
    guarded: bool = False
    # with ``grad``: the positional arguments of a second call, made with the same keywords
    # after this call's forward and before its backward, as a model's next layer is; its
    # answer is held until the backward is done and never read
    between: tuple | None = None

    def describe(self, target_name=""):
        """``attention(Q (2, 4, 5) float64, K (2, 6, 5), ...)`` for messages."""
        names = ARG_NAMES[self.fn]
        parts = [_describe(n, a, self.dtype) for n, a in zip(names, self.args)]
        parts += [_describe(k, v, self.dtype) for k, v in self.kwargs.items()]
        fn = self.fn if self.fn != "sdpa" else "f"
        where = f"{target_name}." if target_name and self.fn != "sdpa" else ""
        return f"{where}{fn}({', '.join(parts)})"


class Described:
    """A request's :meth:`Request.describe`, written only when something reads it: an
    in-process call that answers (most do) never needs its words."""

    __slots__ = ("request",)

    def __init__(self, request):
        self.request = request

    def __str__(self):
        return self.request.describe()


@dataclass
class Result:
    values: tuple  # NumPy arrays: floats as float64, bools as bool
    dtypes: tuple  # the dtypes the implementation returned, as strings
    mutated: tuple | None = None  # names of arguments the call modified (Request.inputs)
    seconds: float = 0.0  # time inside the implementation
    grads: dict | None = None  # argument name -> gradient (float64) or None
    message: str = ""  # gradcheck's complaint, if any
    kept: int | None = None  # the handle of the answer kept as returned (Request.keep)


def _describe(name, a, dtype):
    if isinstance(a, np.ndarray):
        kind = "bool" if a.dtype == bool else dtype
        return f"{name} {tuple(a.shape)} {kind}"
    return f"{name}={a!r}"
