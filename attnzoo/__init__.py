"""attnzoo: the application that drives the zoo, the detectors and the reference.

Rooms: ``cli`` (parsing and dispatch), ``sandbox`` (loading and running code under test),
``runner`` (one detector on one subject, as a finding), ``matrix`` (the kill matrix model, its
renderers and its pytest plugin), ``report`` (what ``attnzoo check`` says), and ``devtools``
(the docs site, mutation testing, benchmarks, the GPU table: the only room that imports
matplotlib or mutmut).

From Python, ``attnzoo.check(fn_or_locator, ...)`` runs ``attnzoo check`` on a function, a
source string or a locator and returns an ``attnzoo.Report`` (``api``, docs/api.md), imported
on first use so that ``import attnzoo`` stays cheap and never imports torch.
"""

__all__ = ["BadInput", "Report", "check"]


def __getattr__(name):
    """``check``, ``Report`` and ``BadInput`` from attnzoo.api, imported when first asked for."""
    if name in __all__:
        from attnzoo import api

        return getattr(api, name)
    raise AttributeError(f"module 'attnzoo' has no attribute {name!r}")
