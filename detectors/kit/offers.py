"""What a subject offers: which calls this target's contract, keywords and declared
capabilities can make, decided per call so a detector asks rather than assumes.

Which functions a detector may call is decided once, by the runner, from the detector's NEEDS
(:mod:`detectors.kit.needs`); what is left to decide here is whether one case of the battery
can be expressed, and in which dtypes the run may call it.
"""

from detectors.kit import sdpa_request
from detectors.kit.capabilities import computed_at, features, layout, returned_as
from detectors.kit.cases import Cases
from detectors.kit.conventions import declared, seen


class Offers:
    """The capability half of :class:`detectors.kit.subject.Subject` (it sets ``target``,
    ``executor``, ``scope`` and ``set_aside``)."""

    parts = ()  # the parts of the running detector's NEEDS that apply (set by the runner)
    declared = ()  # all the parts its NEEDS names

    def uses(self, part):
        """Does the part of the running detector named ``part`` apply to this target?"""
        if part not in self.declared:  # a misspelt part would silently never run
            raise KeyError(f"part {part!r} is not in the detector's NEEDS {self.declared}")
        return part in self.parts

    def dtypes(self, wanted):
        """The dtypes of ``wanted`` the run may call at (all of them, unless scoped)."""
        return tuple(d for d in wanted if self.scope is None or d == self.scope)

    def out_of_scope(self, dtype):
        """Why a call at ``dtype`` may not be made in this run, or None."""
        if self.scope is None or dtype in (None, self.scope):
            return None
        return f"needs {dtype} calls, and --dtype {self.scope} scopes every call of the run"

    def cannot(self, call):
        """Why this target cannot make ``call`` (a contract or a keyword short), or None."""
        if self.contract not in call.spec.contracts:
            return f"the {self.contract} contract cannot express case {call.name}"
        if self.contract == "sdpa":
            missing = [k for k in sdpa_request.keywords(call) if k not in self.manifest.keywords]
            if missing:
                return f"the callable takes no {', '.join(missing)}"
        return None

    def supports(self, call):
        return self.cannot(call) is None

    @property
    def unsupported(self):
        """The capabilities the target declares it lacks (beside the callable or by option);
        asked several times per call, so made once per target and manifest."""
        target, manifest = self.target, self.manifest
        made = getattr(self, "_unsupported", None)
        if made is None or made[0] is not target or made[1] is not manifest:
            made = self._unsupported = (target, manifest, frozenset(target.unsupported)
                                        | frozenset(manifest.unsupported or ()))
        return made[2]

    @property
    def layout(self):
        """"BHLE" (SDPA's (N, H, L, E)), or "BLHE" when the target declares (N, L, H, E): its
        calls are then transposed on the way in and their answers on the way out."""
        return layout(self.unsupported)

    def computed_at(self, dtype):
        """The format the target declares it computes ``dtype`` inputs in (``dtype`` itself,
        unless it declares a float64 convention)."""
        return computed_at(self.unsupported, dtype)

    def returned_as(self, dtype):
        """The dtype the target declares its answers to ``dtype`` inputs come back in."""
        return returned_as(self.unsupported, dtype)

    @property
    def empty_rows(self):
        """What a row with no allowed key gives, as declared (detectors.kit.conventions)."""
        return declared(self.target, self.manifest)

    def seen(self, call):
        """Bool (..., L, S): the keys each row of ``call`` reads: the allowed ones, and every
        key of a row with none allowed under a declared ``uniform`` convention."""
        return seen(call, self.target.causal_alignment, self.empty_rows)

    @property
    def refuses(self):
        return tuple(self.target.refuses) + tuple(self.manifest.refuses or ())

    def outside(self, call):
        """Why ``call`` is outside the declared capabilities, or None. A declared e_ne_ev is
        not a reason: such a call is sent as its zero-padded E == Ev twin."""
        used = features(call) - ({"e_ne_ev"} if sdpa_request.can_pad(self, call) else set())
        lacking = sorted(used & self.unsupported)
        return f"declared unsupported: {', '.join(lacking)}" if lacking else None

    def cases(self, battery, where=lambda spec: True):
        """The battery's attention calls this target can make, smallest first; cases outside
        its declared capabilities, or refused earlier, are set aside and recorded."""
        out = Cases(self)
        for c in battery.attention:
            if not (where(c.spec) and self.supports(c)):
                continue
            why = self.set_aside.get(c.name) or self.outside(c)
            if why:
                self.set_aside[c.name] = why
            else:
                out.append(c)
        return out

    def each(self, calls):
        """``calls`` iterated as the battery's cases are: each marked current, the progress told."""
        return Cases(self, calls)

    @property
    def weights_free(self):
        """Do the weights come with the output (a lesson ``attention``), at no extra call?"""
        return self.contract == "lesson"

    @property
    def heads_axis(self):
        """Does every attention call carry (N, H) in front, as SDPA's does?"""
        return self.contract == "sdpa"
