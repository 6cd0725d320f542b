"""``attnzoo show``: one zoo entry's metadata, its diff against the reference, who catches it.

The evaluation is the kill matrix's own (:mod:`attnzoo.matrix.model`) on the entry's rows
alone, so what ``show`` says an entry's rows are is what the matrix says they are.
"""

from attnzoo.diff import entry_diff
from attnzoo.matrix import model
from attnzoo.vocabulary import CELLS


def source_path(entry):
    """The entry's file relative to the folder that holds ``zoo/`` (wherever it is installed)."""
    return entry.path.relative_to(entry.path.parents[1 if entry.is_bug else 2]).as_posix()


def show(entry, seed=0, device="cpu", dtype="float64", depth=None, progress=None):
    """Metadata, the diff against the reference, and a fresh evaluation.

    Returns (text, failing): ``failing`` when a cell of the entry's rows fails the matrix.
    The evaluation runs at ``depth``, by default the tier at which the entry shows;
    ``progress`` (:class:`attnzoo.progress.Progress`) is told of each cell as it starts.
    """
    meta = entry.meta
    lines = [f"{meta.id}: {meta.title}", f"file:      {source_path(entry)}"]
    if entry.is_bug:
        lines.append(f"category:  {meta.category}   symptom: {meta.symptom}   backends: "
                     f"{', '.join(entry.backends)}")
        lines.append(f"lesson:    {meta.lesson}")
        if meta.source:
            lines.append(f"source:    {meta.source}")
        lines.append(f"seen in:   {meta.seen_in}")
    else:
        lines.append(f"technique: {meta.technique}\nwhy it is correct: {meta.why_correct}")
    lines += ["", entry_diff(entry)]
    depth = depth or getattr(meta, "depth", "quick")
    chosen, started = [r.label for r in model.rows(depth) if r.id == meta.id], set()

    def cell(row, name):  # a line per row off a terminal; each cell, in place, on one
        if progress is None:
            return
        if row.label not in started:
            started.add(row.label)
            progress.detector(chosen.index(row.label) + 1, len(chosen), row.label)
        progress.stage(name)

    m = model.evaluate(seed=seed, select=lambda r: r.id == meta.id, device=device,
                       dtype=dtype, depth=depth, cell=cell)
    lines.append("")
    for row in m.rows:
        caught = m.caught_by(row, m.detectors)
        lines.append(f"{row.backend} at {depth}: caught by {len(caught)}/{len(m.detectors)} "
                     "detectors"
                     + (f": {', '.join(caught)}" if caught else ""))
        for name in m.detectors:
            kind = m.kind(row, name)
            if CELLS[kind].caught or CELLS[kind].failure:
                lines.append(f"  {CELLS[kind].glyph} {m.findings[(row.label, name)].message}")
        for name, why in getattr(meta, "gaps", {}).items():
            lines.append(f"  - {name} cannot catch it: {why}")
    return "\n".join(lines), bool(m.failures())
