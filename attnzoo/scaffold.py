"""``attnzoo new ID``: a zoo file with every field to fill in, picked up at once."""

from pathlib import Path

import zoo

TEMPLATE = '''"""TODO: the mistake in one line.

TODO: the story — what the code means to do, what it does instead, how it shows and why
nothing complains.
"""

import math

import numpy as np

from reference.lesson_numpy import LessonNumpy
from zoo import Bug

BUG = Bug(
    id="{id}",
    title="TODO: one line, named for the mistake",
    category="TODO: one of {categories}",
    symptom="TODO: one of {symptoms}",
    lesson="TODO: one imperative sentence.",
    source="",  # the seed section it comes from, e.g. "seed 003 · Ловушки", or ""
    seen_in="TODO: where people make this mistake",
    caught_by=(),  # TODO: the detectors that must catch it (run: attnzoo show {id})
)


class Numpy(LessonNumpy):
    def attention(self, Q, K, V, mask=None):
        # TODO: make the mistake in one line and mark it with a "# BUG: ..." comment
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = self.softmax(scores)  # (..., T_q, T_k)
        return weights @ V, weights  # (..., T_q, d_v)


NUMPY = Numpy()
# TORCH = ...  (subclass reference.lesson_torch.LessonTorch)
# SDPA = ...   (subclass reference.sdpa.ScaledDotProductAttention)
'''


def scaffold(entry_id, folder=None):
    if not zoo.ID_PATTERN.match(entry_id):
        raise ValueError(f"id {entry_id!r} must be kebab-case, like 'softmax-over-batch'")
    known = {e.id for e in zoo.BUGS + zoo.DECOYS}
    if entry_id in known:
        raise ValueError(f"zoo entry {entry_id!r} exists already: pick another id")
    folder = Path(folder or Path(zoo.__file__).parent)
    path = folder / (entry_id.replace("-", "_") + ".py")
    if path.exists():
        raise ValueError(f"{path} exists already: pick another id")
    path.write_text(TEMPLATE.format(id=entry_id, categories=", ".join(zoo.CATEGORIES),
                                    symptoms=", ".join(zoo.SYMPTOMS)), encoding="utf-8")
    return path
