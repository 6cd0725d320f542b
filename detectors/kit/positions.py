"""Which positions a perturbation or metamorphic relation probes.

On a short axis (every quick case) every position is probed, as always. On a long one, probing
every token would make a relation's cost grow with the square of the case size, so only the
positions where real kernels break are probed: the first and last two, both sides of every tile
or chunk boundary of 64, 128, 256, 512 and 1024 (63/64/65, 127/128/129, ...), the middle, and a
seeded sample of the rest. Their number grows with the logarithm of the length, so a
relation's cost grows about linearly with the case.
"""

import zlib

import numpy as np

EVERY_UP_TO = 16  # axes this long or shorter are probed at every position
TILES = (64, 128, 256, 512, 1024)
SAMPLE = 6  # seeded extra positions on a long axis


def probed(n, seed=0, name="", start=0):
    """Sorted positions in [start, n) to probe on an axis of length ``n``.

    ``seed`` and ``name`` (the case's) fix the sample, so a rerun probes the same positions.
    """
    if n - start <= EVERY_UP_TO:
        return list(range(start, n))
    chosen = {start, start + 1, n // 2, n - 2, n - 1}
    for tile in TILES:
        chosen |= {tile - 1, tile, tile + 1}
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    chosen |= set(int(i) for i in rng.integers(start, n, SAMPLE))
    return sorted(i for i in chosen if start <= i < n)
