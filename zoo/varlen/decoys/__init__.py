"""Correct varlen kernels in the styles real ones are written; the bugs derive from them."""
