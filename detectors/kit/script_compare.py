"""The closing lines of a standalone reproduction (``detectors.kit.script``): the expected
value, or the relation's second side, and the comparison the detector made."""

import numpy as np

from detectors.kit.calls import ARG_NAMES, RETURNS
from detectors.kit.reproduce import SHORT
from detectors.kit.tolerance import EPS, FLOAT64_ATOL


class NoScript(Exception):
    """No standalone script can check this failure again; the message says why."""


# the allowance of a comparison that stated none (a property in words, a crash): float64's
# relative allowance, or 64 units in the last place of a lower precision
UNITS = {"float64": FLOAT64_ATOL, **{d: 64 * e for d, e in EPS.items() if d != "float64"}}
LESSON_OUTPUTS = {"attention": ("out", "weights"), "causal_self_attention": ("out", "weights"),
                  "softmax": ("softmax",), "causal_mask": ("mask",), "sdpa": ("out",)}
SDPA_KEYWORDS = ("attn_mask", "is_causal", "scale", "enable_gqa")


def wrt_names(request):
    """The arguments that require grad: those named, else every float positional one."""
    if request.wrt is not None:
        return tuple(request.wrt)
    return tuple(n for n, a in zip(ARG_NAMES[request.fn], request.args)
                 if isinstance(a, np.ndarray) and a.dtype != bool)


# -- the comparison --------------------------------------------------------------------------


def expected_var(n, judged):
    return "expected" if len(judged) == 1 else f"expected{n + 1}"


def exact_call(request, raw, leaves=None):
    """``attention(query1, key2, …)``: exact attention on the call's float64 inputs."""
    names = ARG_NAMES[request.fn]
    args = [(leaves or {}).get(n) or raw.get(n) or repr(a) for n, a in zip(names, request.args)]
    kw = [f"{k}={(leaves or {}).get(k) or raw.get(k) or repr(v)}"
          for k, v in request.kwargs.items() if k in SDPA_KEYWORDS and v is not None]
    fn = "attention" if request.fn == "sdpa" else request.fn
    return f"{fn}({', '.join(args + kw)})"


def output_exprs(request, var):
    """(name, expression) of each output of a call whose result (or exact value) is ``var``."""
    names = LESSON_OUTPUTS[request.fn]
    if len(names) == 1:
        return [(names[0], var)]
    return [(name, f"{var}[{i}]") for i, name in enumerate(names)]


def closing(requests, claim, calls, judged, relation, built):
    """The lines that make the claim's comparison and end the script."""
    kind = claim.kind
    if kind == "relation":
        return _relation(requests, claim, relation, built, calls)
    if kind == "dtype":
        name, out = output_exprs(requests[claim.call], f"r{claim.call + 1}")[claim.part or 0]
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
        after = " and its backward" if requests[claim.call].grad is not None else ""
        return [f"# the call{after} should leave its arguments as they were",
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
        request, var = requests[n], expected_var(n, judged)
        outputs = list(zip(output_exprs(request, var),
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
    out = output_exprs(requests[side.call], f"r{side.call + 1}")[side.part][1]
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
    wrt = [w for w in wrt_names(request) if w in raw]
    leaves = {w: f"exact_{w}" for w in wrt}
    lines = ["# the expected gradient: the same sum(out * G) through exact attention in float64"]
    lines += [f"exact_{w} = torch.tensor({raw[w]}, dtype=torch.float64, requires_grad=True)"
              for w in wrt]
    out = exact_call(request, raw, leaves)
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
