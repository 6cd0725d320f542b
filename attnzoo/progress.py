"""What a long command is doing, on stderr: in place on a terminal, a line at a time elsewhere."""

import sys
import threading
import time


class Progress:
    """``[3/24] causality: 5/40 cases, 41 calls, 12 s elapsed`` on stderr. On a terminal it is
    rewritten in place at most five times a second, as tqdm and rich do; elsewhere (a log, a CI
    job) it is a line of its own, ``attnzoo: `` first, at each detector's start and at least
    once a minute, so that a long run is never silent. A stderr that cannot be written to
    (closed, or its reader gone) ends it; the run goes on."""

    def __init__(self, stream=None, every=60.0, calls=True):
        self.stream, self.counts = stream or sys.stderr, calls  # counts: says how many calls
        self.on = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = self.last = time.monotonic()
        self.label, self.calls, self.shown, self.where = "loading the target", 0, 0.0, ""
        self.every, self.lock, self.ended = every, threading.Lock(), threading.Event()
        if not self.on:  # the line a minute, also while one call or an import takes long
            threading.Thread(target=self._beat, daemon=True, name="attnzoo-progress").start()

    def detector(self, i, n, name):
        self.label, self.calls, self.where = f"[{i}/{n}] {name}", 0, ""
        if self.on:
            self._show(force=True)
        else:
            self._line(time.monotonic())

    def case(self, done, total, name=None):
        """The detector is at case ``done + 1`` of the ``total`` it iterates (done: all)."""
        self.where = f"{done}/{total} cases" + (f" ({name})" if name and done < total else "")
        self._show(force=done == 0)

    def stage(self, text):
        """What the detector does after its cases (shrinking a failing one)."""
        self.where = text
        self._show(force=True)

    def call(self):
        self.calls += 1
        self._show()

    def _text(self, now):
        where = f"{self.where}, " if self.where else ""
        calls = f"{self.calls} calls, " if self.counts else ""
        return f"{self.label}: {where}{calls}{now - self.start:.0f} s elapsed"

    def _show(self, force=False):
        now = time.monotonic()
        if not self.on:
            if now - self.last >= self.every:
                self._line(now)
            return
        if not force and now - self.shown < 0.2:
            return
        self.shown = now
        self._write(f"\r\x1b[K{self._text(now)}")

    def _line(self, now):
        with self.lock:  # the beat's thread writes too
            if not self.ended.is_set():
                self.last = now
                self._write(f"attnzoo: {self._text(now)}\n")

    def _beat(self):
        while not self.ended.wait(max(0.0, self.last + self.every - time.monotonic())):
            now = time.monotonic()
            if now - self.last >= self.every:
                self._line(now)

    def _write(self, text):
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # closed, or nobody reads it any more
            self.on = False
            self.ended.set()

    def done(self):
        with self.lock:
            self.ended.set()
        if self.on:
            self._write("\r\x1b[K")
