"""Every differentiable input gets its gradient, whatever form the upstream gradient takes.

S6 read in full. A float ``attn_mask`` is added to the scores, so it is differentiable like
query, key and value: its gradient is dS, summed over every axis the mask is broadcast along
(an (L, S) mask shared by all batch items and heads gets the sum of theirs). The backward pass
is handed whatever tensor the layers after attention produced — transposed by a head merge,
expanded with stride 0 by ``out.sum()`` or a mean, a slice with a storage offset, all zeros —
and equal upstream values must give equal gradients whatever their layout. And an input that
does not require grad gets none, while those that do still get theirs.

Each case is differentiated with the upstream gradient in one form (the forms taken in turn
from case to case) and every input requiring grad, then with only some inputs requiring grad.
Only when that answer is off is the case differentiated again with the same values laid out
contiguously, to say which relation failed: where the gradient of query, key or value is wrong
there too, the backward is wrong as a whole, which is ``correct_gradients``' finding, and the
case is not judged here; where only the float mask's is, the finding is the mask's gradient.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.allowed import explicit
from detectors.kit.draw import grid
from detectors.kit.needs import ATTENTION
from detectors.kit.tolerance import gradient_allowance

PROPERTY = ("The gradients of query, key, value and a float attn_mask (summed over its broadcast "
            "axes) equal the reference's, for an upstream gradient contiguous, transposed, "
            "expanded, sliced or zero, and for any subset of inputs requiring grad.")
CLAUSES = ("S6", "S1")
ORACLE = "gradient"
NEEDS = {"attention": ATTENTION.but(torch="autograd")}
MASK = "attn_mask"  # the SDPA keyword of the float mask
NAMES = {"lesson": ("Q", "K", "V"), "sdpa": ("query", "key", "value")}  # the positional inputs
FORMS = {  # the upstream gradient's other forms, and what each relation says
    "transposed": "the same gradients with G a transposed view (laid out as (..., L, H, Ev))",
    "offset": "the same gradients with G the slice [..., 1:] of a wider buffer",
    "expanded": "the same gradients with G expanded from (..., 1, Ev) (stride 0, as a mean "
                "over queries leaves it)",
    "zeros": "zero gradients for an upstream gradient of zeros",
}
BASE = "gradient of sum(out * G), a float mask's summed over the axes it broadcasts along"


def upstream(rng, shape, form):
    """The upstream gradient's values for ``form``: constant over queries when expanded."""
    if form == "zeros":
        return np.zeros(shape)
    if form == "expanded":
        return np.broadcast_to(grid(rng, shape[:-2] + (1,) + shape[-1:]), shape).copy()
    return grid(rng, shape)


class Judged:
    """The reference's gradients of one case, and how far each may be off."""

    def __init__(self, subject, call, wrt):
        self.subject, self.call, self.wrt = subject, call, wrt
        self.reference = subject.judge.reference("torch")
        self.same = explicit(call, subject.target.causal_alignment)  # the reference is top-left
        self.precision = subject.judge.effective(subject.dtype)

    def want(self, g):
        """{name: (the float64 gradient, its allowance)} for the upstream gradient ``g``."""
        if not g.any():  # exactly zero, at every precision: no reference run needed
            c = self.call
            inputs = dict(zip(self.wrt, (c.q, c.k, c.v, c.bias)))
            return {n: (np.zeros_like(inputs[n], dtype=float), 0.0) for n in self.wrt}
        ref = self.reference
        exact = ref.attend(self.same, dtype="float64", grad=g, wrt=self.wrt).grads
        low = None if self.precision == "float64" else ref.attend(
            self.same, dtype=self.precision, grad=g, wrt=self.wrt).grads
        # the reference gives a row with no allowed key zeros: the declared convention's rows
        exact, low = (self.subject.judge.gradients(self.call, a, g) for a in (exact, low))
        return {n: (exact[n], gradient_allowance(exact[n], None if low is None else low[n],
                                                 self.precision)) for n in self.wrt}


def compare(subject, case, answer, want, names, relation):
    """The gradients of ``names`` in ``answer`` against ``want``."""
    for name in names:
        got = (answer.grads or {}).get(name)
        with subject.case(case, answer, relation=relation):
            if got is None:
                expect.fail(f"a gradient for {name}", f"no gradient reached {name}")
            exact, atol = want[name]
            expect.close(got, exact, atol, f"d{name}")


def right(answer, want, names):
    """Does the contiguous backward give ``names`` their gradients, within the allowance?"""
    grads = answer.grads or {}
    return all(grads.get(n) is not None and np.shape(grads[n]) == np.shape(want[n][0])
               and expect.within(grads[n], *want[n]) for n in names)


def alone(names, has_mask, i):
    """The inputs that require grad in case ``i``'s partial call: a float mask alone where
    there is one (the projections frozen, a bias trained), else query, key, value in turn."""
    return (MASK,) if has_mask else (names[i % len(names)],)


def partial(subject, call, g, want, wrt):
    """The answer with only ``wrt`` requiring grad, and whether it is what the relation says:
    their gradients as before, none for the other inputs."""
    answer = subject.attend(call, grad=g, wrt=wrt, grad_layout="contiguous")
    grads = answer.grads or {}
    held = right(answer, want, wrt) and all(n in wrt or got is None for n, got in grads.items())
    return answer, held


def judge_partial(subject, call, answer, want, wrt):
    relation = f"only {', '.join(wrt)} requiring grad"
    compare(subject, call.name, answer, want, wrt, relation)
    for name, got in (answer.grads or {}).items():
        with subject.case(call.name, answer, relation=relation):
            expect.holds(name in wrt or got is None, f"no gradient for {name}",
                         f"a gradient for {name}, which does not require grad")


def whole(subject, call, g, want, wrt, names):
    """The contiguous backward with every input requiring grad, asked only once a relation
    failed: None where its query, key or value gradient is wrong (``correct_gradients``'
    finding), else the answer, whose float-mask gradient this detector judges."""
    base = subject.attend(call, grad=g, wrt=wrt, grad_layout="contiguous")
    if not right(base, want, names):
        return None
    compare(subject, call.name, base, want, wrt[len(names):], BASE)
    return base


def check(subject, battery):
    rng = np.random.default_rng(battery.seed)
    names = NAMES[subject.contract]
    for i, call in enumerate(subject.cases(battery)):
        with subject.trial(call):
            has_mask = call.bias is not None and subject.contract == "sdpa"
            wrt = names + ((MASK,) if has_mask else ())
            shape = subject.expected(call)[0].shape
            judged = Judged(subject, call, wrt)
            form = list(FORMS)[i % len(FORMS)]
            h = upstream(rng, shape, form)
            want = judged.want(h)
            laid = subject.attend(call, grad=h, wrt=wrt,
                                  grad_layout="contiguous" if form == "zeros" else form)
            if not right(laid, want, wrt):
                if whole(subject, call, h, want, wrt, names) is None:
                    continue
                compare(subject, call.name, laid, want, wrt, FORMS[form])
            if form == "zeros":  # every gradient is zero there, whatever the backward does
                h = upstream(rng, shape, "contiguous")
                want = judged.want(h)
            some = alone(names, has_mask, i)
            answer, held = partial(subject, call, h, want, some)
            if held:
                continue
            if form == "zeros" and whole(subject, call, h, want, wrt, names) is None:
                continue
            judge_partial(subject, call, answer, want, some)
