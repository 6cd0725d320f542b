"""The battery's tiers, shallowest first: each is the one before it plus its own cases.

Names only, and no imports: the zoo names the tier a bug is caught at (``BUG.depth``) and may
import this module and nothing else of the kit (tests/test_layout.py), so it never pulls in what
draws or judges the cases.
"""

DEPTHS = ("quick", "standard", "deep")
