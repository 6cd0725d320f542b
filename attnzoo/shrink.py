"""The smallest failing case: a flagged attention case shrunk axis by axis, its property rerun.

When a detector flags a battery case (a wrong value, a NaN or a crash), each size of the case's
spec — the leading (batch) axes, the heads (under grouped heads the key/value heads and the
group size apart), S, L, E, Ev and the masked prefix of a left-padding mask — is shrunk in
turn, first to its least value, then by bisection between the least value and the size that
still fails. Each attempt draws the smaller case from a stream fixed by the seed and the
shapes, runs the detector on it alone, and keeps it when the detector flags it with the same
verdict. The search is deterministic and bounded: at most :data:`MAX_ATTEMPTS` reruns per
finding, stopping early at the ``--deadline``. A bisection assumes that sizes between a passing
and a failing one fail from some point on; where a property is not monotone in a size, the
case kept is a smaller failing one, not necessarily the least. The verdict never changes: the
shrunk case is evidence added to it.
"""

import copy
import time
from dataclasses import replace

from attnzoo.sandbox.executor import DeadlineReached
from detectors.kit.battery import materialise
from detectors.kit.draw import LEFT_PADS
from detectors.kit.expect import Mismatch
from detectors.kit.outcomes import Record
from detectors.kit.verdict import CRASHED, KILLED, NAN, Flag, ImplementationFailure

MAX_ATTEMPTS = 40  # reruns of the detector, each on one case, per flagged finding
SHARE = 0.4  # shrinking may take this share of the time a check's detectors took (Shared)
STREAM = 7  # shrunk cases draw from default_rng([seed, STREAM, *their sizes])


def sizes(spec):
    """The spec's free sizes as {knob: value}; knobs name an axis of the query (``lead0``…)."""
    q, k, v = spec.q, spec.k, spec.v
    knobs = {}
    for j, n in enumerate(q[:-2]):
        at = j - (len(q) - 2)  # offset from the L axis: -1 is the heads axis of 4-D queries
        if spec.gqa and at == -1:
            knobs["heads"], knobs["group"] = k[-3], n // k[-3]  # (N, H_kv · g, L, E)
        else:
            knobs[f"lead{j}"] = n
    knobs.update(S=k[-2], L=q[-2], E=q[-1], Ev=v[-1])
    if spec.mask == "left-padding":
        knobs["prefix"] = max(min(p, knobs["S"] - 1) for p in _pads(spec, q[0]))
    return knobs


def least(spec, knob):
    """The least value a knob may take: two rows and keys where a mask's rows need them."""
    if knob in ("L", "S") and "empty-rows" in (spec.mask, spec.bias):
        return 2
    return 0 if knob == "prefix" else 1


def rebuilt(spec, knobs):
    """The spec with the sizes of ``knobs``: key, value and mask axes follow the query's."""
    q, k, v = spec.q, spec.k, spec.v
    heads = len(q) - 3  # the query's heads axis, which grouped heads split in two
    lead = [knobs["heads"] * knobs["group"] if spec.gqa and j == heads else knobs[f"lead{j}"]
            for j in range(len(q) - 2)]

    def follow(shape, tail, kv=True):  # key, value or mask axes aligned with the query's
        body = list(shape[:-len(tail)])
        for i in range(len(body)):
            qi = len(q) - 2 - (len(body) - i)  # the query axis it lines up with
            if qi < 0 or body[i] == 1:
                continue
            if kv and spec.gqa and qi == len(q) - 3:
                body[i] = knobs["heads"]
            elif body[i] == q[qi]:
                body[i] = lead[qi]
        return tuple(body) + tail

    S, L, E, Ev = knobs["S"], knobs["L"], knobs["E"], knobs["Ev"]
    name = spec.name if spec.name.endswith(" shrunk") else f"{spec.name} shrunk"
    changes = dict(name=name, q=tuple(lead) + (L, E),
                   k=follow(k, (S, E)), v=follow(v, (S, Ev)))
    if spec.mask_shape is not None:
        m = spec.mask_shape
        tail = tuple(n if n == 1 else size for n, size in zip(m[-2:], (L, S)[-len(m):]))
        changes["mask_shape"] = follow(m, tail, kv=False) if len(m) > 2 else tail
    if "prefix" in knobs:
        changes["pads"] = tuple(min(p, knobs["prefix"]) for p in _pads(spec, lead[0]))
    return replace(spec, **changes)


def _pads(spec, batch):
    pads = spec.pads or LEFT_PADS
    return tuple(pads[i % len(pads)] for i in range(batch))


def describe(spec):
    """``q (2, 3, 70, 32), k (2, 3, 129, 32), v (2, 3, 129, 24)``, and the mask's shape."""
    text = f"q {spec.q}, k {spec.k}, v {spec.v}"
    if spec.mask_shape is not None:
        text += f", {'mask' if spec.mask else 'float mask'} {spec.mask_shape}"
    if spec.mask == "left-padding":
        text += f" (masked prefixes {_pads(spec, spec.q[0])})"
    return text


class Shared:
    """What the shrinks of one check share: the smallest case found so far for each battery
    case (several detectors often flag one case, and the next shrink starts there), and a
    budget: shrinking takes at most :data:`SHARE` of the time the detectors themselves took,
    so a flagged check costs about what a clean one does, not once more per flagged detector."""

    def __init__(self, share=SHARE):
        self.cases, self.share, self.ran, self.spent = {}, share, 0.0, 0.0

    def until(self):
        """The clock time at which a shrink starting now must stop."""
        return time.perf_counter() + max(0.0, self.share * self.ran - self.spent)


class Shrinker:
    """Reruns of one detector on one case at a time, counted against the cap."""

    def __init__(self, detector, subject, battery, verdict, until=None):
        self.detector, self.subject, self.battery = detector, subject, battery
        self.until, self.out_of_time = until, False  # the shared budget's end (Shared)
        self.verdict = verdict
        self.attempts, self.found, self.stopped = 0, None, False  # found: (text, evidence)
        self.skipped = []  # sizes whose case could not be built, and why

    def fails(self, spec):
        """Does the detector flag ``spec``'s case with the original verdict? (keeps its Flag)"""
        if self.until is not None and time.perf_counter() > self.until:
            self.stopped = self.out_of_time = True
        if self.stopped or self.attempts >= MAX_ATTEMPTS:
            self.stopped = True
            return False
        self.attempts += 1
        subject, progress = self.subject, self.subject.progress
        if progress is not None:
            progress.stage(f"shrinking {spec.name}: rerun {self.attempts} of at most "
                           f"{MAX_ATTEMPTS}")
        try:  # a step that cannot build its smaller case is skipped, never fatal
            call = materialise(spec, [self.battery.seed, STREAM, *spec.q, *spec.k, *spec.v])
        except (ValueError, IndexError) as e:
            self.skipped.append(f"{describe(spec)}: {type(e).__name__}: {e}")
            return False
        one = copy.copy(self.battery)
        one.attention, one.self_attention, one.softmax = [call], [], []
        run, rerun = subject.run, Record(subject.run.detector)
        subject.run, subject.current, subject.progress = rerun, None, None
        try:
            self.detector.check(subject, one)
        except Flag as flag:
            if flag.verdict == self.verdict:
                self.found = flag.text, flag.evidence
                return True
        except Mismatch as m:
            if m.verdict == self.verdict:
                self.found = m.text, subject.evidence([_Sent(subject.last)], call.name, m.index)
                return True
        except ImplementationFailure as failure:
            if failure.verdict == self.verdict and subject.last is not None:
                self.found = (f"expected an answer, got {failure.what}",
                              subject.evidence([_Sent(subject.last)], call.name))
                return True
        except DeadlineReached:
            self.stopped = True
        except Exception:  # noqa: BLE001 - any other outcome is not the same failure
            pass
        finally:
            subject.run, subject.current, subject.progress = run, None, progress
            run.calls, run.impl_seconds = run.calls + rerun.calls, \
                run.impl_seconds + rerun.impl_seconds  # the finding's cost includes shrinking
        return False


def smallest(detector, subject, battery, case, verdict, what="", shared=None):
    """The ``shrunk`` evidence of a finding flagged on ``case``: from, to (the same when no
    smaller case fails), the reruns, and the smallest case's message, call and snippet; with
    ``skipped`` instead when the case is not an attention case of the battery (a softmax or
    self-attention call, a lesson's fixed example), the verdict is hung, or a crash was not an
    exception (a dead worker costs a restart per rerun). ``what``: a crash's description.
    ``shared`` (:class:`Shared`) holds the smallest case an earlier detector's shrinking
    found for each battery case — when this detector fails there too (one rerun), shrinking
    goes on from there — and the check's time budget for shrinking."""
    start = next((c for c in battery.attention if case and (case == c.name
                  or case.startswith(c.name + " "))), None)
    why = ("a hang is not rerun" if verdict not in (KILLED, NAN, CRASHED) else
           "a crash that took the worker down is not rerun"
           if verdict == CRASHED and not what.startswith("raised ") else
           None if start is not None else
           f"{'case ' + repr(case) if case else 'the call'} is not an attention case of the "
           "battery")
    if why:
        return {"case": case or "", "from": None, "to": None, "sizes": None, "attempts": 0,
                "cap": MAX_ATTEMPTS, "skipped": why}
    began = time.perf_counter()
    shrinker = Shrinker(detector, subject, battery, verdict, shared and shared.until())
    spec = start.spec
    earlier = shared.cases.get(start.name) if shared else None
    if earlier is not None and earlier != spec and shrinker.fails(earlier):
        spec = earlier
    for _ in range(2):  # a second pass: a smaller axis can let another shrink further
        before = spec
        for knob in sizes(spec):
            spec = _shrink_one(shrinker, spec, knob)
        if spec == before or shrinker.stopped:
            break
    if shared is not None:
        shared.spent += time.perf_counter() - began
        if spec != start.spec:
            shared.cases[start.name] = spec
    found = shrinker.found if spec != start.spec else None
    result = {"case": start.name, "from": describe(start.spec), "to": describe(spec),
              "sizes": sizes(spec), "attempts": shrinker.attempts, "cap": MAX_ATTEMPTS}
    if shrinker.out_of_time:
        result["stopped"] = "the check's time for shrinking was spent"
    if shrinker.skipped:
        result["unbuilt"] = shrinker.skipped[:3]
    if found is not None:
        text, evidence = found
        result.update(message=text, call=evidence.call, snippet=evidence.resolve().snippet)
    return result


def _shrink_one(shrinker, spec, knob):
    """``spec`` with ``knob`` as small as still fails: the least value, else a bisection."""
    knobs = sizes(spec)
    low, high = least(spec, knob), knobs[knob]
    if high <= low:
        return spec

    def at(n):
        return rebuilt(spec, {**knobs, knob: n})

    if shrinker.fails(at(low)):
        return at(low)
    best = spec
    while high - low > 1 and not shrinker.stopped:
        mid = (low + high) // 2
        if shrinker.fails(at(mid)):
            high, best = mid, at(mid)
        else:
            low = mid
    return best


class _Sent:
    def __init__(self, request):
        self.requests = (request,) if request is not None else ()
