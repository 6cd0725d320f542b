"""A detector with a bug of its own: its failure must be exit 3, never a verdict on the target."""

PROPERTY = "None: this detector always fails itself."
CLAUSES = ()
ORACLE = "invariant"


def check(subject, battery):
    raise ZeroDivisionError("a bug in the detector, not in the implementation")
