"""Correct implementations that look nothing like the reference: every detector must pass them."""
