"""A reproduction as a standalone script, to paste into someone else's issue tracker.

It imports NumPy, torch for a torch target, and the code under test — ``from pkg.mod import
fn`` for a module, ``importlib`` on the absolute path for a file — and nothing of attnzoo. It
rebuilds the inputs as the snippet does (``detectors.kit.reproduce``, every line run and checked
here), writes out the expected value — a short exact attention in float64 with the contract's
mask, causal, GQA and scale semantics — or, for a relation, makes the second call and states
the relation, and ends with the comparison the detector made (``detectors.kit.claims``): it
prints what was expected, what came back and the largest difference, and exits 1 while the
failure reproduces, 0 once it does not. :class:`NoScript` says why a failure gets none.
"""


import numpy as np

from detectors.kit.calls import ARG_NAMES, RETURNS
from detectors.kit.claims import distinct
from detectors.kit.importing import imports, load
from detectors.kit.reproduce import Builder
from detectors.kit.script_compare import (  # noqa: F401 - NoScript is raised to callers
    NoScript,
    closing,
    exact_call,
    expected_var,
    output_exprs,
    wrt_names,
)
from detectors.kit.script_prelude import ALLOWANCE, helpers
from detectors.kit.snippet import caller_actions, cast


def script(target, requests, claim, relation="", about=()):
    """The text of a standalone script that repeats ``requests`` on ``target`` and checks
    ``claim``; ``about`` are comment lines for its head. Raises NoScript."""
    requests = distinct(requests)
    refuse(target, requests, claim)
    torch = target.backend == "torch"
    built = Builder(orders=True)
    judged = _judged(requests, claim)
    calls, expected = Calls(target, requests, claim, built, _read_early(claim, judged)), []
    for n in judged:  # computed before any call, so an input the call changes cannot move it
        expected.append(f"{expected_var(n, judged)} = {exact_call(requests[n], calls.raw[n])}")
    compare = closing(requests, claim, calls, judged, relation, built)
    lines = [f"# {line}".rstrip() for line in about] + [
        "#",
        "# Run with python: it prints what was expected, what came back and the largest",
        "# difference, and exits 1 while the failure reproduces (0 once it does not).",
        "",
        *[line for line in imports(target) if line != "import sys"],
        "import sys",
        "",
        "import numpy as np",
        "import torch" if torch else None,
        "",
        *load(target),
        "",
        "",
        *helpers(target, requests, claim, judged),
        *(ALLOWANCE if any("allowance(" in line for line in compare) else []),
        "",
        "# the inputs",
        *built.lines,
        *(["", "# the expected value, from the inputs as they were made", *expected]
          if expected else []),
        "",
        "# the calls",
        *calls.lines,
        "",
        *compare,
    ]
    text = "\n".join(line for line in lines if line is not None)
    while "\n\n\n\n" in text:
        text = text.replace("\n\n\n\n", "\n\n\n")
    return text + "\n"


def refuse(target, requests, claim):
    """Raise NoScript when the script could not check the claim faithfully."""
    if any(getattr(r, "swapped", False) for r in requests):
        raise NoScript("the target declared the (N, L, H, E) layout, which the script does "
                       "not rearrange")
    if any(getattr(r, "regrouped", None) is not None for r in requests):
        raise NoScript("the target declared interleaved head groups, which the script does "
                       "not reorder")
    if claim.kind == "gradient" and requests[claim.call].kwargs.get("dropout_p"):
        raise NoScript("a gradient through dropout: there is no exact gradient to compare with")
    if claim.kind == "oracle" and not _judged(requests, claim):
        raise NoScript("a call with dropout: there is no exact answer to compare with")
    if claim.kind == "words":
        raise NoScript("a property of dropout's random draws, which no comparison with an "
                       "exact answer restates")


def _exact(request):
    """Can the exact attention written out in the script answer this call?"""
    return not request.kwargs.get("dropout_p")


def _judged(requests, claim):
    """The calls whose outputs are compared with exact attention."""
    if claim.kind in ("oracle", "answer", "finite") and claim.call is not None:
        return [claim.call] if _exact(requests[claim.call]) else []
    if claim.kind == "oracle":
        return [n for n, r in enumerate(requests) if _exact(r)]
    return []


def _read_early(claim, judged):
    """The (call, output) pairs the comparison reads as the call returned them: a later call
    may write into an answer it handed out, and the detector read each answer when it came."""
    if claim.kind == "relation":
        return {(s.call, s.part) for s in (claim.want, claim.got) if not s.late}
    if claim.kind == "constant":
        return {(claim.got.call, claim.got.part)}
    if claim.kind in ("oracle", "answer", "finite") and claim.call is not None:
        parts = (claim.part,) if claim.part is not None else (None,)
        return {(n, p) for n in (judged or [claim.call]) for p in parts}
    return set()  # every call against exact attention: read at the end, when a later call
    # that changed an earlier answer shows too


# -- the helpers the script defines --------------------------------------------------------------


class Calls:
    """The lines that make the calls, ``r1``, ``r2``, …; ``raw[n]`` maps call n's argument
    names to the float64 (or bool) variables they were cast from; an output in ``early``
    (pairs of call and output, None for every output) is copied as it came back, when calls
    follow (``read``)."""

    def __init__(self, target, requests, claim, built, early=()):
        self.target, self.lines, self.raw = target, [], []
        self.early, self.read = set(early), {}  # read[(call, part)]: its value as returned
        self.torch = target.backend == "torch"
        self.leaves = {}  # argument name -> variable of the judged call's leaf or copy
        made = {}  # a kept call's handle -> its number
        refilled = {r.refill for r in requests} - {None}
        self.count = len(requests)
        for n, request in enumerate(requests, 1):
            special = claim.call == n - 1 and claim.kind in ("gradient", "unchanged", "answer")
            self._call(n, request, built, made, refilled, claim if special else None)

    def _call(self, n, request, built, made, refilled, claim):
        names = ARG_NAMES[request.fn]
        handle = getattr(request, "handle", None)  # set by the subject for a kept call
        named = handle in refilled or request.refill in made  # its arrays are the list a{n}
        parts, arrays, raw, before = [], [], {}, []
        backward = request.grad is not None or request.gradcheck
        wrt = wrt_names(request) if claim is not None and (
            claim.kind == "gradient" or claim.kind in ("answer", "unchanged") and backward) else ()
        for i, (name, a) in enumerate(list(zip(names, request.args))
                                      + list(request.kwargs.items())):
            positional = i < len(request.args)
            if isinstance(a, np.ndarray):
                raw[name] = var = built.name(a, name)
                arg = self._cast(var, a, request)
                if name in wrt:
                    before.append(f"{name} = {arg}.requires_grad_()")
                    self.leaves[name], arg = name, name
                elif claim is not None and claim.kind == "unchanged":
                    before.append(f"{name} = {arg}")
                    self.leaves[name], arg = name, name
                arrays.append(arg)
                arg = f"a{n}[{len(arrays) - 1}]" if named else arg
            else:
                arg = repr(a)
            parts.append(arg if positional else f"{name}={arg}")
        self.raw.append(raw)
        fn = "impl" if request.fn == "sdpa" else f"impl.{request.fn}"
        lines = caller_actions(request, made, arrays, n, named) + before
        if claim is not None and claim.kind == "unchanged":
            copy = ".detach().clone()" if self.torch else ".copy()"
            lines += [f"kept_{name} = {name}{copy}  # to see whether the call changes it"
                      for name in claim.args if name in self.leaves]
            if request.guarded:  # a write put back before returning leaves equal bytes
                lines += _guards(self.torch, [n for n in self.leaves])
        if request.seed is not None:
            lines.append((f"torch.manual_seed({request.seed}); " if self.torch else "")
                         + f"np.random.seed({request.seed})")
        call = [f"r{n} = {fn}({', '.join(parts)})"] + self._between(n, request, built, parts)
        if wrt:
            out = f"r{n}[0]" if RETURNS[request.fn] > 1 else f"r{n}"
            if request.grad is None:  # gradcheck failed: any upstream gradient shows it
                call.append(f"G = np.linspace(-1.0, 1.0, {out}.numel()).reshape(tuple({out}"
                            ".shape))  # an upstream gradient")
                G = "G"
            else:
                G = built.name(request.grad, "G")
            upstream = f"torch.tensor({G}, dtype={out}.dtype{self._on()})"
            call.append(f"if {out}.requires_grad:  # else no gradient reaches any input")
            if request.grad_layout is None:
                call.append(f"    ({out} * {upstream}).sum().backward()  # the gradient of "
                            "sum(out * G)")
            else:
                call.append(f"    {out}.backward(laid_out({upstream}, "
                            f"{request.grad_layout!r}))  # G as a caller lays it out")
        if claim is not None and claim.kind == "unchanged" and request.guarded \
                and not self.torch:
            call = ["try:", *("    " + c for c in call),
                    "except ValueError as error:  # a write into a read-only input",
                    '    print(f"the call wrote into a read-only input: {error}")',
                    "    finish(True)"]
        if claim is not None and claim.kind == "answer":
            what = "call and its backward" if wrt else "call"
            call = ["try:", *("    " + c for c in call),
                    f"except Exception as error:  # the {what} raised",
                    '    print("expected an answer")',
                    '    print(f"got {type(error).__name__}: {error}")',
                    "    finish(True)"]
        self.lines += lines + call
        if handle is not None:
            made[handle] = n
        if n < self.count:
            self._keep(n, request)

    def _keep(self, n, request):
        """Copy call n's outputs the comparison reads, before a later call can change them."""
        for part, (name, out) in enumerate(output_exprs(request, f"r{n}")):
            if (n - 1, part) in self.early or (n - 1, None) in self.early:
                var = f"{name}_{n}"
                self.lines.append(f"{var} = as_array({out})  # as it came back, before the "
                                  "calls after it")
                self.read[n - 1, part] = var

    def output(self, requests, n, part):
        """(name, expression) of call n's output ``part`` as the comparison reads it."""
        name, out = output_exprs(requests[n], f"r{n + 1}")[part]
        return name, self.read.get((n, part), out)

    def _on(self):
        device = self.target.device
        return f", device={device!r}" if device != "cpu" else ""

    def _between(self, n, request, built, parts):
        """The line of the call a request makes between call n's forward and its backward:
        its own positional arrays, leaves where the first call's are, and the same keywords."""
        if request.between is None:
            return []
        names, wrt = ARG_NAMES[request.fn], wrt_names(request)
        later = []
        for name, a in zip(names, request.between):
            arg = self._cast(built.name(a, f"later_{name}"), a, request)
            later.append(f"{arg}.requires_grad_()" if name in wrt and self.torch else arg)
        fn = "impl" if request.fn == "sdpa" else f"impl.{request.fn}"
        return [f"later{n} = {fn}({', '.join(later + parts[len(request.args):])})  # another "
                f"call, as a model's next layer, before r{n}'s backward"]

    def _cast(self, var, a, request):
        """The argument as the request sent it: in its dtype, as a fresh array (the sandbox
        hands every argument over as its own object), in the memory layout it was sent in."""
        arg = cast(var, a, request.dtype, self.torch, self.target.device)
        if arg == var:
            arg = f"{var}.copy()"
        if request.layout != "contiguous" and a.ndim >= 1:
            arg = f"laid_out({arg}, {request.layout!r})"
        return arg


def _guards(torch, names):
    """Lines that make a write into the inputs ``names`` visible even once undone: NumPy
    arrays made read-only, torch's version counter of each tensor kept."""
    if torch:
        return [f"version_{n} = {n}._version  # every in-place op on {n} moves it"
                for n in names]
    return [f"{n}.flags.writeable = False  # a write into {n} raises, even one put back later"
            for n in names]
