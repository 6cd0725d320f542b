"""gradcheck and the manifest are decided in the parent, on data the worker sends.

The worker runs gradcheck's calls and reads their answers (``attnzoo.sandbox.gradcheck``), and
reads what a target offers (``attnzoo.sandbox.offer``); the parent redoes gradcheck's
arithmetic and checks and decides the manifest. These tests hold the parent's gradcheck to
torch.autograd.gradcheck itself on one target per check it makes, and show that a target that
patches gradcheck, torch.allclose or the harness's own helpers in its process, or forges what it
offers, changes no verdict.
"""

import json
import sys
import warnings

import numpy as np
import pytest
import torch
from test_cli import REPO, TARGETS

from attnzoo.sandbox import offer
from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.isolated import Isolated
from attnzoo.sandbox.target import BadTarget, Target, load
from detectors.kit.calls import Request
from detectors.kit.verdict import CRASHED, ImplementationFailure

CASES = ("right", "half_grad", "noisy", "ignores_upstream", "wrong_size", "detached",
         "raises_in_backward")


def target(name, file="gradchecks.py"):
    return Target(name, f"{TARGETS}/{file}:{name}", contract="sdpa", backend="torch")


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s) for s in ((1, 2, 3, 2), (1, 2, 4, 2), (1, 2, 4, 3)))


def gradcheck_request():
    return Request("sdpa", inputs(), dtype="float64", gradcheck=True)


def torch_says(name):
    """torch.autograd.gradcheck on the same function and inputs: ("pass" | "fail" | "crash",
    the first line of its complaint)."""
    sys.path.insert(0, str(REPO / TARGETS))
    try:
        import gradchecks
    finally:
        sys.path.pop(0)
    leaves = [torch.from_numpy(a).requires_grad_() for a in inputs()]
    error = sys.modules["torch.autograd.gradcheck"].GradcheckError
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.autograd.gradcheck(getattr(gradchecks, name), leaves, raise_exception=True)
    except error as e:
        return "fail", str(e).strip().splitlines()[0]
    except Exception as e:  # noqa: BLE001 - the function's own failure
        return "crash", type(e).__name__
    return "pass", ""


def attnzoo_says(executor):
    try:
        result = executor.run(gradcheck_request())
    except ImplementationFailure as e:
        assert e.verdict == CRASHED
        return "crash", e.what.removeprefix("raised ").split(":")[0]
    return ("pass" if result.values[0] else "fail"), result.message


@pytest.mark.parametrize("name", CASES)
def test_parent_gradcheck_agrees_with_torch_gradcheck(name):
    assert attnzoo_says(InProcess(target(name))) == torch_says(name)


def test_each_check_of_gradcheck_is_met_by_one_case():
    """The cases are not all alike: every verdict and complaint gradcheck has for them shows."""
    said = {name: torch_says(name) for name in CASES}
    assert said["right"] == ("pass", "")
    assert said["half_grad"][1].startswith("Jacobian mismatch for output 0")
    assert said["noisy"][1].startswith("Backward is not reentrant")
    assert said["ignores_upstream"][1] == "backward not multiplied by grad_output"
    assert said["wrong_size"] == ("crash", "RuntimeError")  # autograd itself refuses the shape
    assert said["detached"][1] == "Numerical gradient for function expected to be zero"
    assert said["raises_in_backward"] == ("crash", "ValueError")


def test_the_worker_sends_data_and_the_parent_decides_in_a_worker_too():
    executor = Isolated(target("half_grad"), call_seconds=30)
    try:
        assert attnzoo_says(executor) == torch_says("half_grad")
    finally:
        executor.close()


def test_patched_gradcheck_in_the_targets_process_changes_nothing():
    """The target replaces torch.autograd.gradcheck, torch.allclose and the harness's gradcheck
    helpers in its process; its halved gradients still fail gradcheck."""
    executor = Isolated(target("sdpa", "patches_gradcheck.py"), call_seconds=30)
    try:
        passed, complaint = attnzoo_says(executor)
    finally:
        executor.close()
    assert (passed, complaint) == torch_says("half_grad")
    assert passed == "fail" and complaint.startswith("Jacobian mismatch")


# -- the manifest ---------------------------------------------------------------------------


def test_facts_are_plain_data_and_decide_nothing():
    """Reading a target whose signature breaks the contract raises nothing: that is decided
    from the data, which is plain JSON."""
    t = Target("wrong", f"{TARGETS}/wrong_signature.py")
    data = offer.facts(load(t.locator), t)
    assert json.loads(json.dumps(data)) == data
    with pytest.raises(BadTarget, match=r"attention\(Q, K\) does not match the contract"):
        offer.decide(data, t)


def test_decided_manifest_is_the_same_in_process_and_from_a_worker():
    t = Target("sdpa", "torch.nn.functional:scaled_dot_product_attention", contract="sdpa",
               backend="torch")
    executor = Isolated(t)
    try:
        assert executor.manifest == InProcess(t).manifest
    finally:
        executor.close()


NONE_DECLARED = {n: {"strings": [], "single": False} for n in offer.DECLARATIONS}


def params(*given):
    return {"sdpa": {"callable": True, "params": list(given), "text": "(...)"},
            "declared": NONE_DECLARED}


@pytest.mark.parametrize("data", [None, "everything", {"functions": "all"},
                                  {"sdpa": {"callable": True, "params": [{"name": 1}],
                                            "text": "()"}, "declared": {}},
                                  {"functions": {"sdpa": None}, "keywords": ["scale"]},
                                  params({"name": 1, "kind": 1, "default": False}),
                                  params({"name": "q", "kind": True, "default": False}),
                                  params({"name": "q", "kind": -1, "default": False}),
                                  params({"name": "q", "kind": 1, "default": "yes"}),
                                  params({"name": "q", "kind": 1, "default": False}, "k")],
                         ids=["none", "string", "not-a-dict", "bad-params", "old-format",
                              "name-not-text", "kind-bool", "kind-negative", "default-text",
                              "param-not-dict"])
def test_facts_that_are_not_facts_are_malformed(data):
    t = Target("x", "x.py:f", contract="sdpa", backend="torch")
    with pytest.raises(offer.Malformed):
        offer.decide(data, t)


def test_forged_facts_from_the_worker_are_a_bad_target():
    """The target, once imported (as check's describe step imports it), replaces the worker's
    reading of facts with a forged manifest of the old format."""
    t = target("sdpa", "forged_facts.py")
    executor = Isolated()
    try:
        assert executor.describe(t.locator)["kind"] == "callable"
        with pytest.raises(BadTarget, match="sent no usable list of functions"):
            executor.use(t)
    finally:
        executor.close()
