"""The short reproduction printed under a finding: the target imported, the inputs rebuilt
(``detectors.kit.reproduce``) and the calls repeated, nothing else. The standalone script with
the expected value and a comparison is ``detectors.kit.script``'s.
"""

import numpy as np

from detectors.kit.calls import ARG_NAMES
from detectors.kit.importing import imports, load
from detectors.kit.reproduce import Builder
from detectors.kit.script_prelude import LAID_OUT


def snippet(target, requests, relation=""):
    """Python that imports the target (no attnzoo: it runs wherever the target imports) and
    repeats the calls with the same inputs: small arrays
    as literals, battery arrays redrawn from their seeded stream, derived ones as derivations
    (detectors.kit.reproduce), each cast at the call to the dtype the request was sent in and
    laid out in memory as it was sent (a transposed view, a slice at an offset, an expansion)."""
    torch = target.backend == "torch"
    head = imports(target) + ["import numpy as np"] + (["import torch"] if torch else [])
    head += load(target)
    if any(r.layout != "contiguous" for r in requests):  # the arrays as they lay in memory
        head += [line for line in LAID_OUT[torch] if line]
    built, calls, made = Builder(), [], {}  # made: a kept call's handle -> its number
    refilled = {r.refill for r in requests} - {None}
    for n, request in enumerate(requests, 1):
        arg_names = ARG_NAMES[request.fn]
        handle = getattr(request, "handle", None)  # set by the subject for a kept call
        named = handle in refilled or request.refill in made  # its arrays are the list a{n}
        parts, arrays = [], []
        for name, a in list(zip(arg_names, request.args)) + list(request.kwargs.items()):
            if isinstance(a, np.ndarray):
                arrays.append(_laid_out(cast(built.name(a, name), a, request.dtype, torch,
                                              target.device), request.layout, torch))
                var = f"a{n}[{len(arrays) - 1}]" if named else arrays[-1]
                parts.append(var if name in arg_names else f"{name}={var}")
            else:
                parts.append(repr(a) if name in arg_names else f"{name}={a!r}")
        fn = "impl" if request.fn == "sdpa" else f"impl.{request.fn}"
        calls += caller_actions(request, made, arrays, n, named)
        if request.seed is not None:
            calls.append((f"torch.manual_seed({request.seed}); " if torch else "")
                         + f"np.random.seed({request.seed})")
        calls.append(f"r{n} = {fn}({', '.join(parts)})")
        if request.between is not None:  # made before call n's backward, as a next layer is
            later = [_laid_out(cast(built.name(a, f"later_{name}"), a, request.dtype, torch,
                                    target.device), request.layout, torch)
                     for name, a in zip(arg_names, request.between)]
            calls.append(f"later{n} = {fn}({', '.join(later + parts[len(request.args):])})  "
                         f"# another call before r{n}'s backward")
        if handle is not None:
            made[handle] = n
    lines = head + built.lines + calls
    if relation:
        lines.append(f"# {relation}")
    return "\n".join(lines)


def caller_actions(request, made, arrays, n, named):
    """The lines before call ``n`` that do what its request asks of the caller: NaN written
    into a kept call's answer (``overwrite``), that call's argument objects refilled in place
    (``refill``); else the list ``a{n}`` of its arguments, for a later call to refill."""
    lines = []
    if request.overwrite in made:
        m = made[request.overwrite]
        lines += [f"for answer in (r{m} if isinstance(r{m}, tuple) else (r{m},)):",
                  "    answer[...] = float('nan')  # the caller writes into what it was handed"]
    if request.refill in made:
        m = made[request.refill]
        lines += [f"a{n} = a{m}  # the same objects as call {m}, refilled in place",
                  f"for old, new in zip(a{n}, [{', '.join(arrays)}]):", "    old[...] = new"]
        if request.layout == "expanded":  # a stride-0 view cannot be written: made anew
            lines[-2:] = [f"for i, new in enumerate([{', '.join(arrays)}]):", "    try:",
                          f"        a{n}[i][...] = new", "    except (RuntimeError, ValueError):",
                          f"        a{n}[i] = new"]
    elif named:
        lines.append(f"a{n} = [{', '.join(arrays)}]")
    return lines


def _laid_out(expression, layout, torch):
    """The argument in the layout the request sent it in."""
    return expression if layout == "contiguous" else f"laid_out({expression}, {layout!r})"


def cast(var, a, dtype, torch, device):
    """The argument as the request sent it: ``var`` (float64 or bool) in ``dtype``."""
    if not torch:
        return var if a.dtype == bool or dtype == "float64" else f"{var}.astype(np.{dtype})"
    on = f", device={device!r}" if device != "cpu" else ""
    kind = "" if a.dtype == bool else f", dtype=torch.{dtype}"
    return f"torch.tensor({var}{kind}{on})"
