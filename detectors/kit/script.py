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

import os

import numpy as np

from detectors.kit.calls import ARG_NAMES, RETURNS
from detectors.kit.claims import distinct
from detectors.kit.reproduce import SHORT, Builder, caller_actions, cast
from detectors.kit.tolerance import EPS, FLOAT64_ATOL

# the allowance of a comparison that stated none (a property in words, a crash): float64's
# relative allowance, or 64 units in the last place of a lower precision
UNITS = {"float64": FLOAT64_ATOL, **{d: 64 * e for d, e in EPS.items() if d != "float64"}}
LESSON_OUTPUTS = {"attention": ("out", "weights"), "causal_self_attention": ("out", "weights"),
                  "softmax": ("softmax",), "causal_mask": ("mask",), "sdpa": ("out",)}
SDPA_KEYWORDS = ("attn_mask", "is_causal", "scale", "enable_gqa")


class NoScript(Exception):
    """No standalone script can check this failure again; the message says why."""


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
        expected.append(f"{_expected_var(n, judged)} = {_exact_call(requests[n], calls.raw[n])}")
    compare = _compare(requests, claim, calls, judged, relation, built)
    lines = [f"# {line}".rstrip() for line in about] + [
        "#",
        "# Run with python: it prints what was expected, what came back and the largest",
        "# difference, and exits 1 while the failure reproduces (0 once it does not).",
        "",
        "import importlib.util" if _is_file(target) else None,
        "import sys",
        "",
        "import numpy as np",
        "import torch" if torch else None,
        "",
        *load(target),
        "",
        "",
        *helpers(target, requests, claim, judged),
        *(_ALLOWANCE if any("allowance(" in line for line in compare) else []),
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


def _is_file(target):
    return _split(target.locator)[0] is not None


def _split(locator):
    """(absolute file path or None, module name or None, attribute) of a locator, read as
    attnzoo's loader reads it (attnzoo.sandbox.target)."""
    path, _, attr = locator.rpartition(":") if ":" in locator else (locator, "", "")
    if ":" in locator and (os.path.exists(locator) or not _dotted(attr)):
        path, attr = locator, ""
    if path.endswith(".py") or os.sep in path or os.path.exists(path) or not _dotted(path):
        return os.path.abspath(path), None, attr
    return None, path, attr


def _dotted(name):
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def load(target):
    """The lines that import the code under test as ``impl``, as attnzoo's loader does."""
    path, module, attr = _split(target.locator)
    if path is not None:
        stem = os.path.splitext(os.path.basename(path))[0]
        lines = [f"spec = importlib.util.spec_from_file_location({stem!r}, {path!r})",
                 "module = importlib.util.module_from_spec(spec)",
                 "sys.modules[spec.name] = module",
                 f"sys.path.insert(0, {os.path.dirname(path)!r})  # so it can import what lies "
                 "beside it",
                 "spec.loader.exec_module(module)"]
        return lines + [f"impl = module.{attr}" if attr else "impl = module"]
    lines = []
    top = module.split(".")[0]
    here = os.getcwd()
    if os.path.exists(os.path.join(here, top)) or os.path.exists(os.path.join(here, top + ".py")):
        lines.append(f"sys.path.insert(0, {here!r})  # where {top} was found")
    if not attr:
        return lines + [f"import {module} as impl"]
    head, _, rest = attr.partition(".")
    lines.append(f"from {module} import {head}" + ("" if rest else " as impl"))
    return lines + ([f"impl = {head}.{rest}"] if rest else [])


# -- the helpers the script defines --------------------------------------------------------------


def helpers(target, requests, claim, judged):
    """The functions the script defines: reading results, comparing, and exact attention for
    the calls judged against it."""
    torch = target.backend == "torch"
    lines = []
    inputs = any(r.layout != "contiguous" for r in requests)
    upstream = claim.kind in ("gradient", "answer") and \
        requests[claim.call].grad_layout is not None
    if torch and (inputs or upstream):
        lines += _LAID_OUT
    elif inputs:
        lines += _LAID_OUT_NUMPY
    lines += (_AS_ARRAY_TORCH if torch else _AS_ARRAY_NUMPY) + _DIFFERS + _FINISH
    if torch and claim.kind == "unchanged" and any(r.guarded for r in requests):
        lines += _WRITTEN
    exact = [requests[n] for n in judged]
    if claim.kind == "gradient":
        exact.append(requests[claim.call])
    if exact:
        lines += _exact_helpers(target, exact)
    return lines


_WRITTEN = [
    "def written(what, t, version):",
    '    """Print whether the call wrote into ``t``: its version counter moved from ``version``',
    '    (an in-place write moves it even when a second one puts the values back)."""',
    "    moved = t._version != version",
    '    print(f"{what}: version counter {version} before the call, {t._version} after"',
    '          + (" (written into)" if moved else ""))',
    "    return moved",
    "",
    "",
]
_AS_ARRAY_NUMPY = [
    "def as_array(x):",
    '    """A result, or an expected value, as a float64 NumPy array of its own."""',
    "    return np.array(x, dtype=np.float64)  # a copy",
    "",
    "",
]
_AS_ARRAY_TORCH = [
    "def as_array(x):",
    '    """A result, or an expected value, as a float64 NumPy array of its own (a tensor',
    '    detached and moved to the CPU first)."""',
    "    if isinstance(x, torch.Tensor):",
    '        return x.detach().to("cpu", torch.float64).numpy().copy()',
    "    return np.array(x, dtype=np.float64)  # a copy",
    "",
    "",
]
_LAID_OUT_NUMPY = [
    "def laid_out(a, layout):",
    '    """The contiguous array ``a``, same values, laid out in memory as ``layout`` says."""',
    '    if layout == "transposed" and a.ndim >= 2:  # as splitting heads leaves it',
    "        axes = (-3, -2) if a.ndim >= 3 else (-2, -1)",
    "        return np.ascontiguousarray(a.swapaxes(*axes)).swapaxes(*axes)",
    '    if layout == "expanded":  # one copy along every axis it is constant on, stride 0',
    "        small = a",
    "        for axis in range(a.ndim):",
    "            first = small.take([0], axis=axis)",
    "            if small.shape[axis] > 1 and (small == first).all():",
    "                small = first",
    "        return np.broadcast_to(np.ascontiguousarray(small), a.shape)",
    '    if layout == "offset" and a.ndim >= 1:  # [..., 1:] of a buffer one column wider',
    "        wide = np.zeros(a.shape[:-1] + (a.shape[-1] + 1,), dtype=a.dtype)",
    "        wide[..., 1:] = a",
    "        return wide[..., 1:]",
    "    return a",
    "",
    "",
]
_LAID_OUT = [
    "def laid_out(t, layout):",
    '    """The contiguous tensor ``t``, same values, laid out in memory as ``layout`` says."""',
    '    if layout == "transposed":  # made as (..., L, H, Ev) and transposed back',
    "        axes = (-3, -2) if t.dim() >= 3 else (-2, -1)",
    "        return t.transpose(*axes).contiguous().transpose(*axes)",
    '    if layout == "expanded":  # one copy along every axis it is constant on, stride 0',
    "        small = t",
    "        for axis in range(t.dim()):",
    "            if small.shape[axis] > 1 and bool((small == small.narrow(axis, 0, 1)).all()):",
    "                small = small.narrow(axis, 0, 1)",
    "        return small.contiguous().expand(t.shape)",
    '    if layout == "offset":  # [..., 1:] of a buffer one column wider',
    "        wide = t.new_zeros(t.shape[:-1] + (t.shape[-1] + 1,))",
    "        wide[..., 1:] = t",
    "        return wide[..., 1:]",
    "    return t",
    "",
    "",
]
_DIFFERS = [
    "def differs(what, expected, got, atol):",
    '    """Print where ``got`` is furthest from ``expected``; True when that is more than',
    '    ``atol`` (a NaN or inf where a finite number is due always is)."""',
    "    if got is None:",
    '        print(f"{what}: expected an array of shape {as_array(expected).shape}, got None")',
    "        return True",
    "    expected, got = as_array(expected), as_array(got)",
    "    if got.shape != expected.shape:",
    '        print(f"{what}: expected shape {expected.shape}, got shape {got.shape}")',
    "        return True",
    '    with np.errstate(invalid="ignore"):',
    "        diff = np.abs(got - expected)",
    "    equal = (got == expected) | (np.isnan(got) & np.isnan(expected))",
    "    diff = np.where(equal, 0.0, np.where(np.isnan(diff), np.inf, diff))",
    "    if not diff.size:",
    "        return False",
    "    at = np.unravel_index(np.argmax(diff), diff.shape)",
    "    far = int(np.sum(diff > atol))",
    '    print(f"{what} at {list(map(int, at))}: expected {float(expected[at])!r}, "',
    '          f"got {float(got[at])!r}, difference {float(diff[at]):.3g} "',
    '          f"(allowed {atol:.3g}; {far} of {diff.size} entries differ by more)")',
    "    return far > 0",
    "",
    "",
]
_ALLOWANCE = [
    "def allowance(expected, units):",
    '    """The error allowed where the failed check stated none: ``units`` (float64\'s',
    '    1e-10, or 64 units in the last place of a lower precision) times max(1, |expected|)."""',
    "    return units * max(1.0, float(np.abs(as_array(expected)).max(initial=0.0)))",
    "",
    "",
]
_FINISH = [
    "def finish(failed):",
    '    """Exit 1 while the failure reproduces, 0 once it does not."""',
    '    print("reproduced: the implementation still fails" if failed',
    '          else "not reproduced: the implementation now passes this check")',
    "    sys.exit(1 if failed else 0)",
    "",
    "",
]


def _exact_helpers(target, requests):
    """Exact attention for the functions ``requests`` call, in the target's language (torch,
    whose autograd gives the exact gradient, for a torch target), with its declared mask
    convention and causal alignment."""
    torch = target.backend == "torch"
    fns = {r.fn for r in requests}
    drop = target.mask_convention == "drop"
    if target.contract == "sdpa":
        return _sdpa(drop, target.causal_alignment) + _softmax(torch)
    if "causal_self_attention" in fns:
        fns |= {"attention", "causal_mask"}
    lines = _softmax(torch)
    if "attention" in fns:
        lines += _lesson_attention(torch, drop)
    if "causal_mask" in fns:
        tril = "torch.ones(T, T, dtype=torch.bool).tril()" if torch else \
            "np.tril(np.ones((T, T), dtype=bool))"
        lines += ["def causal_mask(T):",
                  '    """(T, T) bool: ' + ("True where query i may NOT attend key j (the drop "
                                             'convention), j > i."""' if drop else
                                             'True where query i may attend key j, j <= i."""'),
                  f"    return {'~' if drop else ''}{tril}", "", ""]
    if "causal_self_attention" in fns:
        lines += ["def causal_self_attention(X, W_q, W_k, W_v):",
                  '    """Attention of the projections X·W under the causal mask: (out, '
                  'weights)."""',
                  "    return attention(X @ W_q, X @ W_k, X @ W_v, causal_mask(X.shape[-2]))",
                  "", ""]
    return lines


def _softmax(torch):
    if torch:
        body = ["    x = torch.as_tensor(x, dtype=torch.float64)",
                "    top = x.amax(dim=-1, keepdim=True)",
                "    e = torch.exp(x - torch.where(torch.isfinite(top), top, 0.0))",
                "    total = e.sum(dim=-1, keepdim=True)",
                "    return e / torch.where(total == 0.0, 1.0, total)"]
    else:
        body = ["    x = np.asarray(x, dtype=np.float64)",
                "    top = np.max(x, axis=-1, keepdims=True)",
                "    e = np.exp(x - np.where(np.isfinite(top), top, 0.0))",
                "    total = np.sum(e, axis=-1, keepdims=True)",
                "    return e / np.where(total == 0.0, 1.0, total)"]
    return ["def softmax(x):",
            '    """Softmax over the last axis in float64; a row of -inf (a query with no '
            'allowed',
            '    key) gives zeros."""', *body, "", ""]


def _lesson_attention(torch, drop):
    forbid = "mask" if drop else "~mask"
    said = "True" if drop else "False"
    if torch:
        body = ["    Q, K, V = (torch.as_tensor(a, dtype=torch.float64) for a in (Q, K, V))",
                "    scores = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5",
                "    if mask is not None:",
                f"        scores = torch.where({forbid}, -torch.inf, scores)"]
    else:
        body = ["    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))",
                "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
                "    if mask is not None:",
                f"        scores = np.where({forbid}, -np.inf, scores)"]
    if torch:
        body[2:2] = ["    mask = None if mask is None else torch.as_tensor(mask)"]
    return ["def attention(Q, K, V, mask=None):",
            '    """Exact attention as the lesson defines it, in float64: softmax(Q·Kᵀ/√d_k)·V, '
            "where",
            f'    a key the mask forbids ({said}) weighs 0. Returns (out, weights)."""',
            *body,
            "    weights = softmax(scores)",
            "    return weights @ V, weights", "", ""]


def _sdpa(drop, alignment):
    where = "keys 0..i" if alignment == "top-left" else "keys 0..i + S - L (bottom-right)"
    diagonal = "" if alignment == "top-left" else "S - L"
    return [
        "def attention(query, key, value, attn_mask=None, is_causal=False, scale=None, "
        "enable_gqa=False):",
        '    """Exact attention as F.scaled_dot_product_attention defines it, in float64:',
        "    softmax(query·keyᵀ·scale + attn_mask)·value, scale 1/√E unless given; a key that "
        "is_causal,",
        f"    a {'True' if drop else 'False'} entry of a bool mask or a -inf entry of a float "
        "one forbids weighs 0,",
        '    and a query with no allowed key gets an output row of zeros."""',
        "    q, k, v = (torch.as_tensor(a, dtype=torch.float64) for a in (query, key, value))",
        "    if enable_gqa:  # query head h reads key/value head h // (H_q / H_kv)",
        "        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)",
        "        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)",
        "    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)",
        "    L, S = scores.shape[-2:]",
        f"    if is_causal:  # query i sees {where}",
        f"        allowed = torch.ones(L, S, dtype=torch.bool).tril({diagonal})",
        "        scores = torch.where(allowed, scores, -torch.inf)",
        "    if attn_mask is not None:",
        "        mask = torch.as_tensor(attn_mask)",
        "        if mask.dtype == torch.bool:",
        f"            scores = torch.where({'mask' if drop else '~mask'}, -torch.inf, scores)",
        "        else:",
        "            scores = scores + mask.to(torch.float64)",
        "    return softmax(scores) @ v",
        "",
        "",
    ]


# -- the calls -------------------------------------------------------------------------------


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
        wrt = _wrt(request) if claim is not None and (
            claim.kind == "gradient" or claim.kind == "answer" and backward) else ()
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
            copy = ".clone()" if self.torch else ".copy()"
            lines += [f"kept_{name} = {name}{copy}  # to see whether the call changes it"
                      for name in claim.args if name in self.leaves]
            if request.guarded:  # a write put back before returning leaves equal bytes
                lines += _guards(self.torch, [n for n in self.leaves])
        if request.seed is not None:
            lines.append((f"torch.manual_seed({request.seed}); " if self.torch else "")
                         + f"np.random.seed({request.seed})")
        call = [f"r{n} = {fn}({', '.join(parts)})"]
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
        for part, (name, out) in enumerate(_outputs(request, f"r{n}")):
            if (n - 1, part) in self.early or (n - 1, None) in self.early:
                var = f"{name}_{n}"
                self.lines.append(f"{var} = as_array({out})  # as it came back, before the "
                                  "calls after it")
                self.read[n - 1, part] = var

    def output(self, requests, n, part):
        """(name, expression) of call n's output ``part`` as the comparison reads it."""
        name, out = _outputs(requests[n], f"r{n + 1}")[part]
        return name, self.read.get((n, part), out)

    def _on(self):
        device = self.target.device
        return f", device={device!r}" if device != "cpu" else ""

    def _cast(self, var, a, request):
        """The argument as the request sent it: in its dtype, as a fresh array (the sandbox
        hands every argument over as its own object), in the memory layout it was sent in."""
        arg = cast(var, a, request.dtype, self.torch, self.target.device)
        if arg == var:
            arg = f"{var}.copy()"
        if request.layout != "contiguous" and a.ndim >= 1:
            arg = f"laid_out({arg}, {request.layout!r})"
        return arg


def _wrt(request):
    """The arguments that require grad: those named, else every float positional one."""
    if request.wrt is not None:
        return tuple(request.wrt)
    return tuple(n for n, a in zip(ARG_NAMES[request.fn], request.args)
                 if isinstance(a, np.ndarray) and a.dtype != bool)


# -- the comparison --------------------------------------------------------------------------


def _expected_var(n, judged):
    return "expected" if len(judged) == 1 else f"expected{n + 1}"


def _exact_call(request, raw, leaves=None):
    """``attention(query1, key2, …)``: exact attention on the call's float64 inputs."""
    names = ARG_NAMES[request.fn]
    args = [(leaves or {}).get(n) or raw.get(n) or repr(a) for n, a in zip(names, request.args)]
    kw = [f"{k}={(leaves or {}).get(k) or raw.get(k) or repr(v)}"
          for k, v in request.kwargs.items() if k in SDPA_KEYWORDS and v is not None]
    fn = "attention" if request.fn == "sdpa" else request.fn
    return f"{fn}({', '.join(args + kw)})"


def _outputs(request, var):
    """(name, expression) of each output of a call whose result (or exact value) is ``var``."""
    names = LESSON_OUTPUTS[request.fn]
    if len(names) == 1:
        return [(names[0], var)]
    return [(name, f"{var}[{i}]") for i, name in enumerate(names)]


def _compare(requests, claim, calls, judged, relation, built):
    """The lines that make the claim's comparison and end the script."""
    kind = claim.kind
    if kind == "relation":
        return _relation(requests, claim, relation, built, calls)
    if kind == "dtype":
        name, out = _outputs(requests[claim.call], f"r{claim.call + 1}")[claim.part or 0]
        want = claim.dtype
        return [f"# {name} should come back as {want}, the dtype of the inputs",
                f"got = str({out}.dtype).removeprefix(\"torch.\")",
                f'print(f"dtype of {name}: expected {want}, got {{got}}")',
                f"finish(got != {want!r})"]
    if kind == "unchanged":
        checks = [f"differs({(n + ' after the call')!r}, kept_{n}, {n}, atol=0.0)"
                  for n in claim.args if n in calls.leaves]
        if calls.torch and any(r.guarded for r in requests):
            checks += [f"written({n!r}, {n}, version_{n})" for n in calls.leaves]
        return ["# the call should leave its arguments as they were",
                f"finish(any([{', '.join(checks)}]))"]
    if kind == "gradient":
        return _gradient(requests, claim, calls, built)
    if kind == "constant":
        got = _side(requests, claim.got, built, calls)
        return [f"# every entry should be {claim.value!r} (the call's known answer)",
                f"finish(differs('out', np.full({claim.shape}, {claim.value!r}), {got}, "
                f"atol={_number(claim.atol) if claim.atol else '0.0'}))"]
    if kind == "finite" and not judged:  # no exact answer: whether every entry is a number
        name, out = calls.output(requests, claim.call, claim.part or 0)
        return [f"# every entry of {name} should be finite",
                f"got = as_array({out})",
                "bad = np.argwhere(~np.isfinite(got))",
                f'print(f"{name}: expected every entry finite, got {{len(bad)}} of {{got.size}} '
                'NaN or inf" + (f", {got[tuple(bad[0])]} at {bad[0].tolist()}" if len(bad) else'
                ' ""))',
                "finish(len(bad) > 0)"]
    if not judged:  # an answer came back where a call with dropout had raised before
        return ['print("expected an answer, and it answered")', "finish(False)"]
    lines, checks = [], []
    for n in judged:
        request, var = requests[n], _expected_var(n, judged)
        outputs = list(zip(_outputs(request, var),
                           [calls.output(requests, n, p) for p in range(RETURNS[request.fn])]))
        if claim.part is not None and claim.call == n:
            outputs = [outputs[claim.part]]
        for (name, want), (_, got) in outputs:
            atol = _atol(claim, request, want)
            label = name if len(judged) == 1 else f"{name} of call {n + 1}"
            checks.append(f"differs({label!r}, {want}, {got}, atol={atol})")
    if relation:
        lines.append(f"# (the detector's relation: {relation})")
    if len(checks) == 1:
        return lines + [f"finish({checks[0]})"]
    return lines + ["failed = [" + ",\n          ".join(checks) + "]", "finish(any(failed))"]


def _atol(claim, request, expected):
    """The allowance the failed comparison used, or the stated one relative to the answer."""
    if claim.atol is not None and claim.kind != "answer":
        return _number(claim.atol)
    return f"allowance({expected}, {UNITS.get(request.dtype, FLOAT64_ATOL)!r})"


def _relation(requests, claim, relation, built, calls):
    """``expected`` and ``got`` as two of the implementation's outputs, and the relation."""
    want, got = (_side(requests, s, built, calls) for s in (claim.want, claim.got))
    names = claim.names if len(claim.names) == 2 else ("f(x)", "f(x′)")
    stated = relation
    for order, var in (built.orders or {}).items():
        stated = stated.replace(str(list(order)), var)
    atol = "0.0" if not claim.atol else _number(claim.atol)
    return [f"# {stated}" if stated else f"# {names[1]} should equal {names[0]}",
            f"expected = {want}  # {names[0]}",
            f"got = {got}  # {names[1]}",
            f"finish(differs({names[1] + ' against ' + names[0]!r}, expected, got, "
            f"atol={atol}))"]


def _side(requests, side, built, calls):
    """The expression of a Side: the output as it came back (or, ``late``, as it is at the
    end), then its steps."""
    early = None if side.late else calls.read.get((side.call, side.part))
    out = _outputs(requests[side.call], f"r{side.call + 1}")[side.part][1]
    expr = early or f"as_array({out})"
    for step in side.steps:
        if step[0] == "crop":
            expr = f"{expr}[..., :{step[1]}]"
        elif step[0] == "reshape":
            expr = f"{expr}.reshape({step[1]})"
        else:
            expr = _take(expr, step[1], step[2], built)
    return expr


def _take(expr, order, axis, built):
    """``expr`` taken by ``order`` along ``axis``: a slice for a run of indices, the list
    for a few, else the order's name (one name for every use of the same order)."""
    order = list(order)
    if order == list(range(order[0], order[0] + len(order))):
        return f"{expr}[..., {order[0]}:{order[-1] + 1}{', :' * (-axis - 1)}]"
    index = built.order(order) if len(order) > SHORT else order
    return f"np.take({expr}, {index}, axis={axis})"


def _number(x):
    """An allowance with three significant digits, rounded up so it never tightens."""
    x = float(x)
    if x <= 0 or not np.isfinite(x):
        return repr(x)
    unit = 10.0 ** (np.floor(np.log10(x)) - 2)
    return f"{np.ceil(x / unit) * unit:.3g}"


def _gradient(requests, claim, calls, built):
    """The exact gradient of the same sum(out * G) through exact attention in float64, and
    the comparison of the one gradient that failed."""
    request, raw = requests[claim.call], calls.raw[claim.call]
    wrt = [w for w in _wrt(request) if w in raw]
    leaves = {w: f"exact_{w}" for w in wrt}
    lines = ["# the expected gradient: the same sum(out * G) through exact attention in float64"]
    lines += [f"exact_{w} = torch.tensor({raw[w]}, dtype=torch.float64, requires_grad=True)"
              for w in wrt]
    out = _exact_call(request, raw, leaves)
    if RETURNS[request.fn] > 1:
        out += "[0]"
    G = "G" if request.grad is None else built.name(request.grad, "G")
    lines.append(f"({out} * torch.tensor({G})).sum().backward()")
    if any(name not in wrt for name in claim.args):
        raise NoScript(f"the gradient of {claim.args[0]}, which the call did not ask for")
    checks = []
    for name in claim.args or wrt:
        atol = _number(claim.atol) if claim.atol is not None else \
            _atol(claim, request, f"exact_{name}.grad")
        checks.append(f"differs({'d' + name!r}, exact_{name}.grad, {name}.grad, atol={atol})")
    if len(checks) == 1:
        return lines + [f"finish({checks[0]})"]
    return lines + ["failed = [" + ",\n          ".join(checks) + "]", "finish(any(failed))"]


def _guards(torch, names):
    """Lines that make a write into the inputs ``names`` visible even once undone: NumPy
    arrays made read-only, torch's version counter of each tensor kept."""
    if torch:
        return [f"version_{n} = {n}._version  # every in-place op on {n} moves it"
                for n in names]
    return [f"{n}.flags.writeable = False  # a write into {n} raises, even one put back later"
            for n in names]
