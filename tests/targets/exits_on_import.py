"""A module that takes its process down while it is imported: bad input, not a verdict."""
import os

os._exit(4)
