"""What a detector needs of a target, as data beside the detector (as PyTorch's OpInfo does).

A detector module declares ``NEEDS``: one :class:`Needs`, or a dict from part name to
:class:`Needs` when it checks several functions (its softmax part, its attention part, its
self-attention part). The runner decides once, before the detector makes a call, which parts
apply to the target; the detector runs those parts (``subject.uses(part)``) and asks nothing
else. When no part applies the verdict is n/a, with the reason of the first part that failed.
"""

from dataclasses import dataclass, replace

CONTRACTS = ("lesson", "sdpa")


@dataclass(frozen=True)
class Needs:
    """One part's needs: the contracts it speaks, the lesson functions it calls (a lesson
    module must define them), the SDPA keywords it passes (an SDPA callable must take them)
    and whether it needs torch (autograd)."""

    functions: tuple = ()
    keywords: tuple = ()
    contracts: tuple = CONTRACTS
    torch: str = ""  # what needs torch ("autograd"), or "" when NumPy will do
    why: str = ""  # why the other contract cannot express this part

    def lacking(self, target, manifest):
        """Why this part cannot run on ``target``, or None when it can."""
        if self.torch and target.backend != "torch":
            return f"{self.torch} needs torch; this is a NumPy implementation"
        if target.contract not in self.contracts:
            return self.why or f"the {target.contract} contract has no {'/'.join(self.functions)}"
        if target.contract == "lesson":
            return next(filter(None, map(manifest.lacks, self.functions)), None)
        missing = [k for k in self.keywords if k not in manifest.keywords]
        return f"the callable takes no {', '.join(missing)}" if missing else None

    def but(self, **changes):
        return replace(self, **changes)


SDPA_ONLY = "is an SDPA argument; the lesson contract has none"
CAUSAL_MASK = Needs(("causal_mask",), contracts=("lesson",),
                    why="an SDPA-style callable has no causal_mask")
SOFTMAX = Needs(("softmax",), contracts=("lesson",), why="an SDPA-style callable has no softmax")
ATTENTION = Needs(("attention",))  # an SDPA callable is attention itself
SELF_ATTENTION = Needs(("causal_self_attention",), keywords=("is_causal",))  # SDPA: projections


def parts(needs):
    """``NEEDS`` as (part name, Needs) pairs, in the order the detector runs them."""
    return tuple(needs.items()) if isinstance(needs, dict) else (("", needs),)


def applicable(needs, target, manifest):
    """(the names of the parts that apply, the reason the first one that does not)."""
    names, reason = [], None
    for name, need in parts(needs):
        why = need.lacking(target, manifest)
        if why is None:
            names.append(name)
        elif reason is None:
            reason = why
    return tuple(names), reason


def describe(needs):
    """One line for ``attnzoo detectors``: what each part needs, contract by contract."""
    out = []
    for name, need in parts(needs):
        by = []
        if "lesson" in need.contracts:
            by.append("lesson " + "+".join(need.functions))
        if "sdpa" in need.contracts:
            by.append("sdpa" + "".join(f" {k}=" for k in need.keywords))
        text = " | ".join(by) + (", torch" if need.torch else "")
        out.append(f"{name}: {text}" if name else text)
    return "; ".join(out)
