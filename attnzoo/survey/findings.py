"""The survey's root causes read against each library's documentation.

Each adapter keeps, beside its ``DECLARATION``, a ``FINDINGS`` tuple of
:class:`~attnzoo.survey.capabilities.Review`: for one root cause of docs/survey.json (matched by
implementation, dtype and the diagnosis' feature set) whether it is a *divergence* from what
the library documents, a *convention* the library documents, or attnzoo's own *artefact*, with
the link and a one-sentence paraphrase. The page renders it under the root cause; a root cause
without one reads "not reviewed against the documentation", an artefact says why it is not
the library's.
"""

import importlib

from attnzoo.survey import adapters

NOT_REVIEWED = "Against the documentation: not reviewed against the documentation."


def reviews():
    """{implementation name: {(dtype, frozenset(features)): Review}} over every adapter."""
    out = {}
    for name in adapters.NAMES:
        module = importlib.import_module(f"{adapters.__name__}.{name}")
        out[module.DECLARATION.name] = {r.key(): r for r in getattr(module, "FINDINGS", ())}
    return out


def key(run, group):
    """A diagnosis group's key, as a Review's."""
    return run["dtype"], frozenset(group.get("features") or ())


def line(review):
    """The sentence under a root cause: what the documentation says and how it stands."""
    if review is None:
        return NOT_REVIEWED
    if review.kind == "artefact":  # a false finding: said as plainly as the library's are
        return f"Against the documentation: not the library's fault. {review.note}"
    issue = f" Upstream: {review.issue}." if review.issue else ""
    note = f" {review.note}" if review.note else ""
    if review.kind == "divergence":
        return (f"Against the documentation: a divergence. The [documentation]({review.docs}) "
                f"says {review.says}{note}{issue}")
    state = (" The adapter now declares it; the survey must be rerun for this row."
             if review.declared else " Not declared in the adapter.")
    return (f"Against the documentation: a convention. The [documentation]({review.docs}) "
            f"says {review.says}{note}{state}{issue}")
