""""allclose against F.scaled_dot_product_attention on a few random inputs", as a suite.

The test most projects write first: three random batches of square shapes (B = 2, T = 4,
d = 8), with and without ``is_causal``, compared to PyTorch at atol 1e-6. It catches whatever
changes those numbers and nothing that needs a mask, a head, a large logit or a second call.
"""

import numpy as np

from detectors.kit import expect
from detectors.kit.battery import SelfCall
from detectors.kit.lesson_calls import as_call, unbatched
from detectors.kit.needs import SELF_ATTENTION
from detectors.kit.specs import SelfSpec

PROPERTY = "Random square inputs, with and without a causal mask, match F.scaled_dot_product_attention (atol 1e-6)."
CLAUSES = ("C3", "C4")
ORACLE = "baseline"
NEEDS = {"self-attention": SELF_ATTENTION,
         "attention": SELF_ATTENTION.but(functions=("causal_self_attention", "attention"))}


def check(subject, battery):
    with subject.at("float64"):  # a typical suite tests at float64, whatever the run's dtype
        suite(subject)


def suite(subject):
    import torch  # here, not at import: discovering the detectors must not load torch
    import torch.nn.functional as F

    rng = np.random.default_rng(1)
    for trial in range(3):
        q, k, v = (rng.standard_normal((4, 8)) for _ in range(3))
        want = F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v))).numpy()
        if subject.uses("attention"):
            a = subject.attend(as_call(subject, q, k, v, name=f"random #{trial}"))
            with subject.case(f"random #{trial}", a):
                expect.holds(np.allclose(unbatched(a.out, (4, 8)), want, atol=1e-6),
                             "F.scaled_dot_product_attention's output", "a different output")
        x = rng.standard_normal((2, 4, 8))
        ws = [rng.standard_normal((8, 8)) / 3 for _ in range(3)]
        call = SelfCall(SelfSpec(f"random causal #{trial}", x.shape, 8, 8), x, *ws,
                        f"random causal #{trial}")
        a = subject.self_attend(call)
        q, k, v = (torch.from_numpy(p) for p in call.projections())
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
        with subject.case(call.name, a):
            expect.holds(a.out.shape == want.shape and np.allclose(a.out, want, atol=1e-6),
                         "F.scaled_dot_product_attention(is_causal=True)'s output",
                         "a different output")
