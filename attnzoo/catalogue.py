"""The catalogue, in one order: what ``list`` prints, ``show`` evaluates and the matrix's rows.

Bugs come by category (the order of ``zoo.CATEGORIES``; an unknown category last), then by id;
decoys follow in the zoo's order. A zoo backend maps to one contract and one argument type:
``ROW_BACKENDS`` is that mapping, for the matrix's rows and for ``check`` of a zoo file alike.
"""

# zoo backend -> (contract, what the functions take)
ROW_BACKENDS = {
    "numpy": ("lesson", "numpy"),
    "torch": ("lesson", "torch"),
    "sdpa": ("sdpa", "torch"),
}
REFERENCE_ROWS = (
    ("numpy", "reference.lesson_numpy"),
    ("torch", "reference.lesson_torch"),
    ("sdpa", "reference.sdpa:scaled_dot_product_attention"),
)


def category_rank(category):
    import zoo

    order = list(zoo.CATEGORIES)
    return order.index(category) if category in order else len(order)


def categories():
    """Every category in order: the zoo's, then any unknown one a bug names, sorted."""
    import zoo

    known = list(zoo.CATEGORIES)
    return known + sorted({e.meta.category for e in zoo.BUGS} - set(known))


def bugs():
    """The zoo's bugs in catalogue order."""
    import zoo

    return sorted(zoo.BUGS, key=lambda e: (category_rank(e.meta.category), e.id))


def decoys():
    import zoo

    return list(zoo.DECOYS)


def known_ids():
    return {e.id for e in bugs() + decoys()} | {"reference"}


def listing():
    """One dict per entry, as ``attnzoo list --json`` prints it."""
    return [
        {"id": e.id, "kind": "bug", "category": e.meta.category, "symptom": e.meta.symptom,
         "backends": list(e.backends), "title": e.meta.title}
        for e in bugs()
    ] + [
        {"id": e.id, "kind": "decoy", "category": "correct", "symptom": "-",
         "backends": list(e.backends), "title": e.meta.title}
        for e in decoys()
    ]


def listing_text(rows):
    w = max(len(r["id"]) for r in rows)
    lines = [f"{'id':<{w}}  {'category':<10} {'symptom':<7} {'backends':<17} title"]
    for r in rows:
        lines.append(f"{r['id']:<{w}}  {r['category']:<10} {r['symptom']:<7} "
                     f"{','.join(r['backends']):<17} {r['title']}")
    n_bugs = sum(1 for r in rows if r["kind"] == "bug")
    lines.append(f"{n_bugs} bugs, {len(rows) - n_bugs} decoys")
    return "\n".join(lines)


def source_path(entry):
    """The entry's file relative to the folder that holds ``zoo/`` (wherever it is installed)."""
    return entry.path.relative_to(entry.path.parents[1 if entry.is_bug else 2]).as_posix()


def show(entry, seed=0, device="cpu", dtype="float64"):
    """``attnzoo show``: metadata, the diff against the reference, and a fresh evaluation.

    Returns (text, failing): ``failing`` when a cell of the entry's rows fails the matrix.
    """
    from attnzoo.diff import entry_diff
    from attnzoo.matrix import model
    from attnzoo.vocabulary import CELLS

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
    m = model.evaluate(seed=seed, select=lambda r: r.id == meta.id, device=device,
                       dtype=dtype)
    lines.append("")
    for row in m.rows:
        caught = m.caught_by(row, m.detectors)
        lines.append(f"{row.backend}: caught by {len(caught)}/{len(m.detectors)} detectors"
                     + (f": {', '.join(caught)}" if caught else ""))
        for name in m.detectors:
            kind = m.kind(row, name)
            if CELLS[kind].caught or CELLS[kind].failure:
                lines.append(f"  {CELLS[kind].glyph} {m.findings[(row.label, name)].message}")
        for name, why in getattr(meta, "gaps", {}).items():
            lines.append(f"  - {name} cannot catch it: {why}")
    return "\n".join(lines), bool(m.failures())
