"""A library's first call of each shape is its warm-up, not its time.

Compiling libraries (a jit, torch.compile, XLA) build a program for every new shape: the first
call of a shape can take seconds, the next ones microseconds. The survey's budget is meant for
checking, so :class:`PerShape` gives each worker's first call of a shape the warm-up time limit,
and gives back to the budget what that call took, up to the budget once more in all. What it
gave back is reported beside the run's time, so a reader sees which libraries spend it.
"""

import time

import numpy as np


def shape_of(request):
    """What a compiler specialises on: the function, dtype, layout, every argument's shape
    (a keyword's value, where it is not an array), and whether gradients are asked."""
    def sig(a):
        return ("array", np.shape(a), str(a.dtype)) if isinstance(a, np.ndarray) else a

    return (request.fn, request.dtype, request.layout, tuple(sig(a) for a in request.args),
            tuple(sorted((k, sig(v)) for k, v in request.kwargs.items())),
            request.grad is not None, bool(request.gradcheck))


class PerShape:
    """An executor that treats each worker's first call of a shape as a warm-up: the call gets
    the warm-up time limit, and its time is added back to the executor's deadline (at most
    ``cap`` seconds in all)."""

    def __init__(self, executor, cap):
        self.executor, self.cap = executor, cap
        self.shapes, self.worker = set(), None
        self.calls, self.seconds = 0, 0.0

    def run(self, request):
        if self.executor.proc is not self.worker or self.executor.proc is None:
            self.shapes.clear()  # a new worker has compiled nothing yet
        key = shape_of(request)
        if key in self.shapes:
            return self.executor.run(request)
        self.shapes.add(key)
        self.executor.cold(request.fn)
        start = time.monotonic()
        try:
            return self.executor.run(request)
        finally:
            self.worker = self.executor.proc
            spent = max(0.0, min(time.monotonic() - start, self.cap - self.seconds))
            self.calls, self.seconds = self.calls + 1, self.seconds + spent
            if self.executor.deadline is not None:
                self.executor.deadline += spent

    def fresh(self):
        self.executor = self.executor.fresh()
        return self

    def report(self):
        """{"calls", "seconds"}: the warm-up calls and the time given back for them."""
        return {"calls": self.calls, "seconds": round(self.seconds, 1)}

    def __getattr__(self, name):
        return getattr(self.executor, name)
