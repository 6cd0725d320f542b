"""Convention probe for how ``window_size`` counts (V4): inclusive ends, as flash-attention's
``(wl, wr)`` keep wl + wr + 1 keys, or sides that count the current token, as HF/Mistral's
``sliding_window=W`` keeps W keys — and is it the one the target declares?

Special inputs: windows on the left, the right and both, over sequences longer than them, called
with the window exactly as written (no translation). Under the other convention every window is
one key narrower on each bounded side. The report names the counting the target follows; the
other detectors call it with windows written in its declared counting.
"""

from detectors.kit import varlen

PROPERTY = ("window_size is counted as the target declares (inclusive (wl, wr) by default).")
CLAUSES = ("V4",)
ORACLE = "special-input"


def narrower(window_size):
    """The contract's window a counts-the-current-token kernel keeps for this window_size."""
    return tuple(w - 1 if w >= 1 else w for w in window_size)


def check(subject):
    seed = subject.seed * 1000 + 960
    built = [varlen.build(seed + n, f"window {w} as written", (9, 6), (11, 6), window=w)
             .to(subject.dtype) for n, w in enumerate([(3, -1), (-1, 2), (2, 3)])]
    probes = [p for p in map(subject.plain, built)  # less what the target declares it lacks
              if p is not None and p.args["window_size"] != (-1, -1)]
    if not probes:
        raise varlen.SetAside("every window probe uses what the target declares unsupported")
    follows = set(varlen.WINDOW_COUNTING)
    for probe in probes:
        out, _ = subject.run(probe, raw=True)
        for counting in list(follows):
            window = probe.args["window_size"]
            if counting != "inclusive":
                window = narrower(window)
            want, _ = varlen.reference(probe.with_(window_size=window), subject.alignment)
            try:
                subject.same(out, want, probe, rows=varlen.owned(probe))
            except varlen.VarlenMismatch:
                follows.discard(counting)
    declared = subject.target.window_counting
    if declared not in follows:
        seen = sorted(follows)[0] if follows else "neither inclusive nor counting the current token"
        raise varlen.VarlenMismatch(f"windows as written: the window follows {seen}; the target "
                                    f"declares {declared} (V4)")
