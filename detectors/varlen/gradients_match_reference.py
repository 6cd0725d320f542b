"""Where the target offers autograd, its gradients are the float64 reference's: dq, dk and dv
(for a paged cache, the gradient of the cache blocks) equal those of the reference under
torch's autograd, for upstream gradients of several forms.

Differential, backward: q, k and v are leaves that require grad; when the output does not
require grad the target has no backward and the detector is not applicable. Upstream gradients
are drawn in four forms, one per case in turn: random, ones, random but zero on every other
sequence's rows, and random in a non-contiguous layout; rows no sequence owns get zero upstream
(their output is undefined). Padding — keys allocated past those used, slots past a sequence's
end, pages nobody uses, guard rows of q — must get zero gradient, as the reference gives it; a
shared page gets the sum of its readers'. A backward that ignores the mask, drops the cap's
derivative, or forgets to sum the heads of a group differs from it.
"""

import torch

from detectors.kit import varlen
from detectors.kit.verdict import NotApplicable

PROPERTY = ("Where the output requires grad, dq, dk and dv equal the reference's autograd "
            "gradients for every upstream-gradient form; padding gets zero gradient.")
CLAUSES = ("V1", "V2", "V3", "V4", "V5", "V6", "V7", "V8", "V11", "V12")
ORACLE = "differential"
FORMS = ("random", "ones", "zero on some rows", "non-contiguous")
GRADIENT_SLACK = 4  # the backward rounds more often than the forward: 4x the forward tolerance


def upstream(case, form, shape, seed):
    """The gradient of the output, (total_q, Hq, Dv) in the case's dtype, 0 on unowned rows."""
    gen = torch.Generator().manual_seed(seed)
    if form == "ones":
        g = torch.ones(shape, dtype=torch.float64)
    elif form == "non-contiguous":
        g = torch.randn(shape[::-1], generator=gen, dtype=torch.float64).permute(2, 1, 0)
    else:
        g = torch.randn(shape, generator=gen, dtype=torch.float64)
    if form == "zero on some rows":
        cu = case.args["cu_seqlens_q"]
        for b in range(0, case.B, 2):
            g[int(cu[b]):int(cu[b + 1])] = 0
    g[sum(case.lens_q):] = 0
    return g.to(case.q.dtype)


def gradients(fn, case, g):
    """(dq, dk, dv) of ``fn`` at the case, or None when its output does not require grad."""
    # leaves laid out as the case's tensors are (V12): strided views stay strided views
    leaves = [varlen.strided_like(x.detach().clone(), x).requires_grad_(True)
              for x in (case.q, case.k, case.v)]
    out = fn(case.with_(q=leaves[0], k=leaves[1], v=leaves[2]))
    if not out.requires_grad:
        return None
    got = torch.autograd.grad(out, leaves, g, allow_unused=True)
    return [torch.zeros_like(x) if d is None else d for d, x in zip(got, leaves)]


def check(subject):
    subject.require("autograd")
    for n, case in enumerate(subject.cases()):
        form = FORMS[n % len(FORMS)]
        shape = (case.q.shape[0], case.q.shape[1], case.v.shape[-1])
        g = upstream(case, form, shape, subject.seed * 1000 + n)
        got = gradients(lambda c: subject.run(c)[0], case, g)
        if got is None:
            raise NotApplicable("the output does not require grad: the target offers no "
                                "autograd")
        wide = case if case.q.dtype in (torch.float16, torch.bfloat16) else case.to(torch.float64)
        want = gradients(lambda c: varlen.reference(c, subject.alignment)[0], wide,
                         g.to(wide.q.dtype))
        for name, a, b in zip(("dq", "dk", "dv"), got, want):
            if a.shape != b.shape:
                raise varlen.VarlenMismatch(f"{case.name}: {name} has shape {tuple(a.shape)}, "
                                            f"the input {tuple(b.shape)}")
            subject.same(a, b, case, name, relation=f"should equal the reference's {name} "
                         f"(upstream gradient {form})", tolerance=GRADIENT_SLACK)
