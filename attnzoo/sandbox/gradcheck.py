"""``torch.autograd.gradcheck`` (slow mode, its default tolerances) split at the socket.

The implementation's process (:func:`collect`) makes exactly the calls gradcheck makes, in its
order — the forward call, the central differences of every input element, two passes of
one-hot vector-Jacobian products, a backward with zero output gradients and one with an
undefined output gradient — and reads each answer as raw bytes; an exception becomes data (which
phase raised what). The parent (:func:`decide`) redoes gradcheck's arithmetic and checks on
those bytes with the same torch operations, in the same order, so a target that patches
``torch.autograd.gradcheck`` or ``torch.allclose`` in its own process changes no verdict.
"""

import warnings

import numpy as np

from attnzoo.inert import inert
from attnzoo.sandbox import wire
from detectors.kit.verdict import CRASHED, ImplementationFailure

EPS, ATOL, RTOL, NONDET_TOL = 1e-6, 1e-5, 1e-3, 0.0  # gradcheck's defaults
# the Jacobians the parent builds, in bytes, may be this many times the reply's buffers: an
# honest reply sends two perturbed outputs per input element, and its Jacobians take less
# than it sent (0.5 to 0.9 of it on the gradcheck calls of correct_gradients)
JACOBIANS = 8
PHASES = ("forward", "numerical", "analytical", "zero_grad", "undefined_grad")
NOT_REENTRANT = (
    "Backward is not reentrant, i.e., running backward with same input and grad_output "
    "multiple times gives different values, although analytical gradient matches numerical "
    f"gradient.The tolerance for nondeterminism was {NONDET_TOL}.")
UNDEFINED_RAISED = ("Expected backward function to handle undefined output grads. Please look "
                    'at "Notes about undefined output gradients" in '
                    '"tools/autograd/derivatives.yaml"')
UNDEFINED_NONZERO = ("Expected all input grads to be undefined or zero when all output grads "
                     'are undefined or zero. Please look at "Notes about undefined output '
                     'gradients" in "tools/autograd/derivatives.yaml"')


# -- the implementation's side -------------------------------------------------------------

def collect(backend, fn, args, kwargs, request, buffers, exception, timeout):
    """The phases gradcheck runs, each ``{"data": ...}`` or ``{"raised": text}`` (the first
    exception ends the run, as it ends gradcheck). ``exception`` words an exception the
    implementation raised; ``timeout`` is the exception that must pass through."""
    torch = backend.torch
    leaves, _ = backend.requires_grad(args, {}, request)  # every float positional argument
    diff = [i for i, a in enumerate(leaves) if isinstance(a, torch.Tensor) and a.requires_grad]

    def func(*xs):
        answer = fn(*xs, **kwargs)
        return answer[0] if isinstance(answer, (tuple, list)) else answer

    def read(t):
        return None if t is None else backend.read(t, buffers, request)

    state, phases = {}, []

    def forward():
        out = func(*leaves)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the call returned a {type(out).__name__}, not a torch.Tensor")
        state["out"] = out
        return {"out": read(out), "differentiable": bool(out.requires_grad)}

    def numerical():
        columns = []
        for i in diff:
            x, inputs = leaves[i].data, list(leaves)
            inputs[i] = x
            for idx in np.ndindex(*x.shape):
                entry = x[idx]
                orig = entry.clone()
                entry.copy_(orig - EPS)
                outa = func(*inputs)
                entry.copy_(orig + EPS)
                outb = func(*inputs)
                entry.copy_(orig)
                columns.append([read(outa), read(outb)])
        return {"columns": columns}

    def vjp_rows(out):
        base = torch.zeros_like(out.clone(), memory_format=torch.legacy_contiguous_format)
        flat, rows = base.view(-1), []
        for j in range(flat.numel()):
            flat.zero_()
            flat[j] = 1.0
            grads = torch.autograd.grad(out, [leaves[i] for i in diff], base,
                                        retain_graph=True, allow_unused=True)
            rows.append([read(g.clone()) if isinstance(g, torch.Tensor) else None
                         for g in grads])
        return rows

    def analytical():
        return {"passes": [vjp_rows(state["out"]), vjp_rows(state["out"])]}

    def zero_grad():
        outs = tuple(o for o in (state["out"],) if o.requires_grad)
        grads = torch.autograd.grad(
            outs, [leaves[i] for i in diff],
            [torch.zeros_like(o, memory_format=torch.legacy_contiguous_format) for o in outs],
            allow_unused=True)
        return {"grads": [_grad_data(torch, g, leaves[i], read) for g, i in zip(grads, diff)]}

    def undefined_grad():
        fresh = func(*leaves)
        outs = [torch._C._functions.UndefinedGrad()(o) for o in (fresh,)
                if isinstance(o, torch.Tensor) and o.requires_grad]
        zeros = [torch.zeros_like(o, memory_format=torch.legacy_contiguous_format) for o in outs]
        try:
            grads = torch.autograd.grad(outs, [leaves[i] for i in diff], zeros, allow_unused=True)
        except RuntimeError:
            return {"runtime_error": True}
        return {"grads": [read(g) for g in grads]}

    steps = dict(zip(PHASES, (forward, numerical, analytical, zero_grad, undefined_grad)))
    for name in PHASES:
        if name == "analytical" and not phases[0]["data"]["differentiable"]:
            phases.append({"data": {"passes": []}})
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                phases.append({"data": steps[name]()})
        except timeout:
            raise
        except ImplementationFailure as e:  # an answer whose storage cannot be read
            phases.append({"raised": e.what})
            break
        except BaseException as e:  # noqa: BLE001 - the implementation's failure, not ours
            phases.append({"raised": f"raised {exception(e)}"})
            break
    return {"phases": phases, "inputs": len(diff)}


def _grad_data(torch, g, leaf, read):
    if g is None:
        return None
    return {"grad": read(g), "device": str(g.device), "leaf_device": str(leaf.device)}


# -- the parent's side -----------------------------------------------------------------------

def decide(data, buffers, sent_shapes, call):
    """(passed, complaint) from the collected phases; a phase that raised before any check
    failed is the implementation's crash, as it is in gradcheck. ``sent_shapes``: the shapes
    of the float inputs as the parent sent them (gradcheck's differentiable inputs)."""
    try:
        return _decide(data, buffers, sent_shapes, call)
    except RuntimeError as e:  # a torch operation refused what the worker sent
        raise wire.Malformed(f"a gradcheck reply torch cannot read ({e})") from None


def _decide(data, buffers, sent_shapes, call):
    import torch  # only when a gradcheck reply is read, not on import

    phases = data["phases"]
    if not isinstance(phases, list) or not phases or len(phases) > len(PHASES):
        raise wire.Malformed("a gradcheck reply without its phases")
    if data.get("inputs") != len(sent_shapes):
        raise wire.Malformed("a gradcheck reply for other inputs than those sent")

    def phase(k):
        if k >= len(phases):
            raise wire.Malformed(f"a gradcheck reply that stops before its {PHASES[k]} phase")
        p = phases[k]
        if "raised" in p:
            raise ImplementationFailure(CRASHED, inert(str(p["raised"])[:2000]), call)
        return p["data"]

    fwd = phase(0)
    out = _tensor(torch, fwd["out"], buffers)
    differentiable = fwd["differentiable"]
    if not isinstance(differentiable, bool):
        raise wire.Malformed("a gradcheck reply that does not say if the output is differentiable")
    # the numerical Jacobian in the output's dtype (float outputs only), two float64 analytical
    entries = sum(int(np.prod(s)) for s in sent_shapes) * out.numel()
    each = (out.element_size() if out.is_floating_point() else 0) + (16 if differentiable else 0)
    wire.affordable(entries * each, buffers, JACOBIANS, "gradcheck's Jacobians")
    numerical = _numerical(torch, phase(1)["columns"], buffers, out, sent_shapes, call)
    if not differentiable:
        if any(torch.ne(j, 0).sum() > 0 for j in numerical):
            return False, "Numerical gradient for function expected to be zero"
    else:
        passes = phase(2)["passes"]
        if not isinstance(passes, list) or len(passes) != 2:
            raise wire.Malformed("a gradcheck reply without two passes of backward rows")
        (j1, sizes_ok), (j2, _) = (_stack(torch, p, buffers, sent_shapes, out.numel(), call)
                                   for p in passes)
        if not sizes_ok:
            return False, "Analytical gradient has incorrect size"
        if any(a.numel() != 0 and (a - b).abs().max() > NONDET_TOL for a, b in zip(j1, j2)):
            return False, NOT_REENTRANT
        for j, (a, n) in enumerate(zip(j1, numerical)):
            kind = torch.promote_types(a.dtype, n.dtype)
            if not torch.allclose(a.to(kind), n.to(kind), RTOL, ATOL):
                return False, f"Jacobian mismatch for output 0 with respect to input {j},"
    complaint = _zero_grad(torch, phase(3)["grads"], buffers, sent_shapes)
    if complaint:
        return False, complaint
    undefined = phase(4)
    if undefined.get("runtime_error") is True:
        return False, UNDEFINED_RAISED
    for g in undefined["grads"]:
        if g is not None and not _tensor(torch, g, buffers).eq(0).all():
            return False, UNDEFINED_NONZERO
    return True, ""


def _tensor(torch, desc, buffers):
    """A torch tensor of exactly the dtype and values the worker described."""
    a, name = wire.array(desc, buffers)
    t = torch.from_numpy(np.array(a))
    return t.to(torch.bfloat16) if name == "bfloat16" else t


def _numerical(torch, columns, buffers, out, sent_shapes, call):
    """Per input, gradcheck's numerical Jacobian (input numel, output numel) in the output's
    dtype: central differences (b - a) / (2 eps), with its checks on the neighbours."""
    sizes = [int(np.prod(s)) for s in sent_shapes]
    if not isinstance(columns, list) or len(columns) != sum(sizes):
        raise wire.Malformed("a gradcheck reply with too few or too many differences")
    if not out.is_floating_point():  # gradcheck allocates Jacobians for float outputs only
        return []
    jacobians, at = [], 0
    for shape, n in zip(sent_shapes, sizes):
        jac = out.new_zeros((n, out.numel()))
        for d, idx in enumerate(np.ndindex(*shape)):
            a, b = (_tensor(torch, c, buffers) for c in columns[at + d])
            on = f"on index {idx} by {EPS}, but got:"
            if a.shape != b.shape:
                _assertion(f"Expected `func` to return outputs with the same shape when inputs "
                           f"are perturbed {on} shapes {a.shape} and {b.shape}.", call)
            if a.dtype != b.dtype:
                _assertion(f"Expected `func` to return outputs with the same dtype when inputs "
                           f"are perturbed {on} dtypes {a.dtype} and {b.dtype}.", call)
            col = ((b - a) / (2 * EPS)).reshape(-1)
            if col.numel() != jac.shape[1]:
                raise ImplementationFailure(
                    CRASHED, f"raised RuntimeError: a perturbed call returned {col.numel()} "
                    f"values where the call returned {jac.shape[1]}", call)
            jac[d] = col
        jacobians.append(jac)
        at += n
    return jacobians


def _stack(torch, rows, buffers, sent_shapes, numel_out, call):
    """gradcheck's _stack_and_check_tensors: (per input a float64 (input numel, output numel)
    Jacobian from the one-hot rows, whether every row had its input's size)."""
    if not isinstance(rows, list) or len(rows) != numel_out:
        raise wire.Malformed("a gradcheck reply with too few or too many backward rows")
    jacobians = [torch.zeros((int(np.prod(s)), numel_out), dtype=torch.float64)
                 for s in sent_shapes]
    sizes_ok = True
    for j, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(sent_shapes):
            raise wire.Malformed("a backward row for other inputs than those sent")
        for i, desc in enumerate(row):
            if desc is None:
                continue  # allow_unused: this row of the Jacobian is zero
            g = _tensor(torch, desc, buffers)
            if list(g.shape) != list(sent_shapes[i]):
                sizes_ok = False
            if g.numel() != jacobians[i].shape[0]:
                _assertion(f"Expected out_jacobian column to have {jacobians[i].shape[0]} "
                           f"elements, but got {g.numel()}", call)
            jacobians[i][:, j] = g.reshape(-1)
    return jacobians, sizes_ok


def _zero_grad(torch, grads, buffers, sent_shapes):
    """gradcheck's _test_backward_mul_by_grad_output on the gradients of a zero upstream."""
    if not isinstance(grads, list) or len(grads) != len(sent_shapes):
        raise wire.Malformed("zero-upstream gradients for other inputs than those sent")
    for g, shape in zip(grads, sent_shapes):
        if g is None:
            continue
        t = _tensor(torch, g["grad"], buffers)
        if not t.eq(0).all():
            return "backward not multiplied by grad_output"
        if t.dtype != torch.float64:
            return "grad is incorrect type"
        if g["device"] != g["leaf_device"]:
            return "grad is incorrect device"
        if list(t.shape) != list(shape):
            return "grad is incorrect size"
    return None


def _assertion(text, call):
    raise ImplementationFailure(CRASHED, f"raised AssertionError: {text}", call)
