"""Import an adapter's library when the sandbox loads the adapter, not when it is surveyed.

Each adapter module sets ``__getattr__ = _lazy.loader(DECLARATION, _sdpa)``: reading its
``DECLARATION`` imports nothing (the survey reads every declaration in one process, and keras
takes its backend once per process), while the worker's ``load("…:sdpa")`` imports the
library then, under the load time limit, so no call pays for the import.
"""

import importlib

from attnzoo.sandbox.target import BadTarget


def loader(declaration, fn, before=None, name="sdpa"):
    """The module ``__getattr__`` that gives ``fn`` as ``name`` (``sdpa``, or a varlen
    adapter's ``attn_varlen``), the library imported first."""
    wanted = name

    def __getattr__(name):
        if name != wanted:
            raise AttributeError(name)
        try:
            if before is not None:
                before()
            importlib.import_module(declaration.module)
        except Exception as e:  # noqa: BLE001 - any import failure means "cannot run here"
            first = (str(e).strip().splitlines() or [""])[0]
            raise BadTarget(f"{declaration.module} failed to import: {type(e).__name__}: "
                            f"{first}") from None
        return fn

    return __getattr__
