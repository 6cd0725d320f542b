"""A module whose import raises an exception with no message."""
raise RuntimeError
