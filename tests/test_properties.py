"""The properties added with the standard battery, tested directly: the statistics of the
dropout detector hold their stated false-alarm rate, answers kept by the sandbox are the
objects returned, and the reference and every decoy are clean on the new detectors at the
depths they run at (the wrong cases are in test_detectors.py)."""

import math

import numpy as np
import pytest

import detectors.dropout_pattern_is_independent as dropout
from attnzoo.matrix import model as matrix
from attnzoo.runner import run
from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.isolated import Isolated
from attnzoo.sandbox.target import Target
from detectors import by_name
from detectors.kit.battery import Battery, materialise
from detectors.kit.calls import Request
from detectors.kit.specs import Spec
from detectors.kit.subject import Subject
from detectors.kit.verdict import ImplementationFailure
from reference.sdpa import scaled_dot_product_attention

NEW = ("softmax_of_empty_row_is_zero", "dtype_follows_input", "answers_stay_as_returned",
       "dropout_pattern_is_independent", "low_precision_gradients")
STANDARD = Battery(0, depth="standard")


# -- dropout: the false-alarm rate is what the docstring says ---------------------------------

def test_the_bands_spend_exactly_the_stated_false_alarm_rate():
    assert dropout.ALPHA <= 1e-6
    n = 1000
    two_sided = 2 * math.exp(-2 * n * dropout.band(n) ** 2)
    one_sided = math.exp(-2 * n * dropout.band(n, sides=1) ** 2)
    assert two_sided == pytest.approx(dropout.ALPHA / dropout.TESTS)
    assert one_sided == pytest.approx(dropout.ALPHA / dropout.TESTS)
    assert dropout.TESTS == len(dropout.RATES) * (1 + len(dropout.AXES))  # the union bound


@pytest.mark.parametrize("p", dropout.RATES)
def test_independent_bernoulli_patterns_pass_over_many_seeds(p):
    """2000 seeds of exactly the null hypothesis: at 1e-6 per run, none may be flagged."""
    for seed in range(2000):
        kept = np.random.default_rng(seed).random(dropout.SHAPE) >= p
        assert dropout.findings(kept, p) == [], seed


@pytest.mark.parametrize("axis", list(dropout.AXES.values()))
def test_a_pattern_shared_along_any_axis_is_found(axis):
    p = 0.2
    shape = list(dropout.SHAPE)
    shape[axis] = 1
    kept = np.broadcast_to(np.random.default_rng(1).random(shape) >= p, dropout.SHAPE)
    found = dropout.findings(kept, p)
    assert len(found) == 1 and list(dropout.AXES)[axis] in found[0][0]


def test_a_wrong_keep_rate_is_found():
    kept = np.random.default_rng(2).random(dropout.SHAPE) >= 0.45  # p = 0.45, claimed 0.5
    assert "kept" in dropout.findings(kept, 0.5)[0][0]


def reference_sdpa():
    target = Target("reference", "reference.sdpa:scaled_dot_product_attention", "sdpa", "torch")
    return Subject(target, InProcess(target, obj=scaled_dot_product_attention))


def test_torch_dropout_passes_over_many_seeds():
    detector = by_name()["dropout_pattern_is_independent"]
    for seed in range(30):
        finding = run(detector, reference_sdpa(), Battery(seed))
        assert finding.verdict == "survived", (seed, finding.message)


# -- answers kept as returned -------------------------------------------------------------------

class Reuses:
    """Writes every answer into one buffer and returns a view of it."""

    def __init__(self):
        self.buffer = np.zeros(64)

    def softmax(self, x):
        view = self.buffer[:x.size].reshape(x.shape)
        view[...] = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
        return view


def lesson():
    target = Target("reuses", "test_properties:Reuses", "lesson", "numpy")
    return InProcess(target, obj=Reuses())


def test_a_kept_answer_is_the_object_returned_and_is_read_again_later():
    executor = lesson()
    first = executor.run(Request("softmax", (np.array([0.0, 1.0, 2.0]),), keep=True))
    executor.run(Request("softmax", (np.array([5.0, 5.0]),)))
    now, dtypes = executor.reread(first.kept)
    assert not np.array_equal(now[0], first.values[0])  # the buffer was written again
    assert np.allclose(now[0][:2], 0.5) and dtypes == ("float64",)


def test_answers_are_kept_only_when_asked_and_only_a_few():
    from attnzoo.sandbox import probes

    executor = lesson()
    executor.run(Request("softmax", (np.array([0.0, 1.0]),)))
    assert executor.kept == {}
    handles = [executor.run(Request("softmax", (np.array([0.0, 1.0]),), keep=True)).kept
               for _ in range(probes.KEPT + 3)]
    assert len(executor.kept) == probes.KEPT
    executor.reread(handles[-probes.KEPT])
    with pytest.raises(LookupError, match="no longer kept"):  # the detector's mistake
        executor.reread(handles[0])


def test_the_worker_keeps_answers_across_calls():
    target = Target("zoo", "zoo.output_buffer_reused:SDPA", "sdpa", "torch")
    executor = Isolated(target)
    try:
        q = np.random.default_rng(0).standard_normal((1, 2, 3, 4))
        first = executor.run(Request("sdpa", (q, q, q), keep=True))
        again, _ = executor.reread(first.kept)
        assert np.array_equal(again[0], first.values[0])
        executor.run(Request("sdpa", (q[..., :2, :], q, q)))  # a smaller call, same workspace
        later, _ = executor.reread(first.kept)
        assert not np.array_equal(later[0], first.values[0])
        executor.fresh()  # a new worker: what the old one kept is gone, and that is said
        with pytest.raises(ImplementationFailure, match="restarted"):
            executor.reread(first.kept)
    finally:
        executor.close()


class Remembers:
    """A lesson softmax that records the objects it was called with."""

    def __init__(self):
        self.seen = []

    def softmax(self, x):
        self.seen.append(x)
        return np.exp(x) / np.exp(x).sum(-1, keepdims=True)


def test_refill_calls_on_the_kept_objects_and_overwrite_writes_nan_into_the_answer():
    obj = Remembers()
    executor = InProcess(Target("remembers", "test_properties:Remembers", "lesson", "numpy"),
                         obj=obj)
    first = executor.run(Request("softmax", (np.array([0.0, 1.0]),), keep=True))
    again = executor.run(Request("softmax", (np.array([3.0, 3.0]),), refill=first.kept,
                                 overwrite=first.kept, inputs=True))
    assert obj.seen[1] is obj.seen[0] and np.array_equal(obj.seen[0], [3.0, 3.0])
    assert np.allclose(again.values[0], 0.5) and again.mutated == ()
    fresh = executor.run(Request("softmax", (np.array([3.0, 3.0]),)))
    assert obj.seen[2] is not obj.seen[0]  # without refill: new objects
    written, _ = executor.reread(first.kept)
    assert np.isnan(written[0]).all() and not np.isnan(fresh.values[0]).any()
    with pytest.raises(LookupError, match="no longer kept"):  # the detector's mistake
        executor.run(Request("softmax", (np.array([1.0]),), refill=first.kept + 99))
    with pytest.raises(ImplementationFailure, match="no longer has the shape"):
        executor.run(Request("softmax", (np.array([1.0, 2.0, 3.0]),), refill=first.kept))


def test_the_worker_refills_kept_tensors_and_writes_into_kept_answers():
    executor = Isolated(Target("sdpa", "reference.sdpa:scaled_dot_product_attention", "sdpa",
                               "torch"))
    try:
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((2, 1, 2, 3, 4))
        first = executor.run(Request("sdpa", (a, a, a), keep=True, layout="transposed"))
        refilled = executor.run(Request("sdpa", (b, b, b), refill=first.kept,
                                        overwrite=first.kept))
        fresh = executor.run(Request("sdpa", (b, b, b), layout="transposed"))
        assert np.array_equal(refilled.values[0], fresh.values[0])
        written, _ = executor.reread(first.kept)
        assert np.isnan(written[0]).all()
    finally:
        executor.close()


@pytest.mark.parametrize("entry, pair", [("answer_memoised_by_identity", ("r2", "r3")),
                                         ("key_cached_by_data_ptr", ("r2", "r3")),
                                         ("output_buffer_cleared_by_scaling", None)])
def test_the_reproduction_repeats_what_the_caller_did(entry, pair):
    """The snippet refills the kept tensors and writes into the kept answer as the sandbox did,
    so run as it is printed it shows the two answers differing (or NaN from finite inputs:
    the buffer entry's first answer is the buffer, written over by then)."""
    target = Target(entry, f"zoo/{entry}.py:SDPA", "sdpa", "torch")
    finding = run(by_name()["answers_follow_values"], Subject(target, InProcess(target)),
                  STANDARD)
    code = finding.evidence.snippet
    assert "old[...] = new" in code or "answer[...] = float('nan')" in code, code
    scope = {}
    exec(compile(code, "<snippet>", "exec"), scope)  # noqa: S102 - our own reproduction
    if pair is None:
        assert np.isnan(scope["r3"].numpy()).any(), code
        return
    first, second = (scope[r].numpy() for r in pair)
    assert not np.array_equal(first, second, equal_nan=True), code


# -- clean where they run -----------------------------------------------------------------------

CLEAN = [r for r in matrix.rows("standard") if r.kind != "bug"]


@pytest.mark.parametrize("row", CLEAN, ids=[r.label for r in CLEAN])
def test_reference_and_decoys_are_clean_at_standard(row):
    for name in NEW:
        finding = run(by_name()[name], matrix.subject_for(row), STANDARD)
        assert finding.verdict in ("survived", "n/a"), finding.message


def test_low_precision_gradients_runs_at_standard_and_holds_for_torch():
    subject = reference_sdpa()
    finding = run(by_name()["low_precision_gradients"], subject, STANDARD)
    assert finding.verdict == "survived" and finding.calls >= 12, finding.message


def _row(label):
    return next(r for r in matrix.rows("standard") if r.label == label)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_softmax_shifted_by_the_global_maximum_loses_the_diffuse_head_at_float16(seed):
    """heads-of-different-sharpness puts a diffuse head ~12 below the call's sharpest score:
    a softmax that subtracts the array's maximum divides by a subnormal sum there, on every
    draw, while the reference keeps within its bound (the case alone, so no other case can
    be what catches it)."""
    lpg = by_name()["low_precision_gradients"]
    sharp = Battery(seed, depth="standard")
    sharp.attention[:] = [c for c in sharp.attention if c.name == "heads-of-different-sharpness"]
    finding = run(lpg, matrix.subject_for(_row("softmax-global-max-torch")), sharp)
    assert finding.verdict in ("killed", "nan") and "at float16" in finding.message, \
        finding.message
    assert run(lpg, matrix.subject_for(_row("reference-torch")), sharp).verdict == "survived"


@pytest.mark.parametrize("dtype, queries, group", [("float16", 91, 4), ("bfloat16", 129, 16),
                                                   ("bfloat16", 40, 1)])
def test_the_tiled_floor_is_torchs_cpu_flash_backward_bit_for_bit(dtype, queries, group):
    """With one key every weight is 1, so each tile's share of dV is a sum of grid values,
    exact in float32: the model of accumulating dV tile by tile in ``dtype`` must then give
    PyTorch's CPU flash-attention backward to the bit (it tiles queries by 32 below 192)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from detectors.kit.draw import grid
    from detectors.low_precision_gradients import accumulated_by_tiles

    rng = np.random.default_rng(0)
    heads = 2 * group
    q, upstream = grid(rng, (1, heads, queries, 16)), grid(rng, (1, heads, queries, 16))
    k, v = grid(rng, (1, 2, 1, 16)), grid(rng, (1, 2, 1, 16))
    half = getattr(torch, dtype)
    Q, K, V = (torch.tensor(a, dtype=half, requires_grad=True) for a in (q, k, v))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(Q, K, V, enable_gqa=group > 1)
    (out * torch.tensor(upstream, dtype=half)).sum().backward()
    model = accumulated_by_tiles(np.ones((1, heads, queries, 1)), upstream, group, dtype)
    assert np.array_equal(V.grad.double().numpy(), model)
    exact = upstream.reshape(1, 2, group, queries, 16).sum((2, 3))[:, :, None]
    if group == 16:  # the case that made the floor: the running sum is off, the model with it
        assert np.abs(model - exact).max() > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_torch_sdpa_holds_with_16_query_heads_per_key_head_at_deep(seed):
    """16 query heads per key head, 129 queries, at float16: torch's CPU flash backward
    accumulates dV in float16 tile by tile, 80 roundings, which a reference that sums once does
    not see; the tiled floor is what keeps torch itself clean there. The case is the one the
    deep tier drew when the floor was made, drawn from the same stream."""
    lpg = by_name()["low_precision_gradients"]
    spec = Spec("gqa-16-at-float16-magnitudes", q=(2, 32, 129, 111), k=(2, 2, 17, 111),
                v=(2, 2, 17, 111), mask="key-padding", mask_shape=(2, 1, 1, 17), gqa=True,
                logits=64.0, key_logits=64.0, scale=2.0 ** -15, tags=("gqa", "magnitude"))
    deep = Battery(seed, depth="quick")
    deep.attention[:] = [materialise(spec, [seed, 0, 2019])]
    finding = run(lpg, matrix.subject_for(_row("builtin-sdpa-sdpa")), deep)
    assert finding.verdict == "survived", finding.message


def test_a_gradient_wrong_at_float64_is_left_to_correct_gradients():
    """A −1e9 fill spreads an empty row at every precision: its dV is a wrong answer, judged by
    correct_gradients, not a rounding error to be weighed against a rounding-sized bound."""
    import detectors.low_precision_gradients as lpg
    from detectors.kit.allowed import explicit
    from detectors.kit.draw import grid

    call = next(c for c in STANDARD.attention if c.name == "empty-rows-long")
    for label, wrong in (("large-negative-fill-torch", {"V"}), ("reference-torch", set())):
        subject = matrix.subject_for(_row(label))
        reference = subject.judge.reference("torch")
        upstream = grid(np.random.default_rng(0), call.expected()[0].shape)
        same = explicit(call, "top-left")
        exact = reference.attend(same, dtype="float64", grad=upstream).grads
        assert lpg.wrong_already(subject, reference, call, same, upstream, exact) == wrong
    finding = run(by_name()["correct_gradients"],
                  matrix.subject_for(_row("large-negative-fill-torch")), STANDARD)
    assert finding.verdict == "killed", finding.message


@pytest.mark.parametrize("executor", [InProcess, Isolated])
def test_inputs_are_read_back_only_when_the_request_asks(executor):
    """input_immutability asks; every other call skips reading its arguments back."""
    target = Target("zoo", "zoo.query_scaled_in_place:TORCH", "lesson", "torch")
    run_on = executor(target)
    try:
        q = np.random.default_rng(0).standard_normal((2, 3, 4))
        assert run_on.run(Request("attention", (q, q, q))).mutated is None
        assert run_on.run(Request("attention", (q, q, q), inputs=True)).mutated == ("Q",)
    finally:
        run_on.close()
