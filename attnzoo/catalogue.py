"""The catalogue, in one order: what ``list`` prints and the matrix's rows.

Bugs come by category (the order of ``zoo.CATEGORIES``; an unknown category last), then by id;
decoys follow in the zoo's order. A zoo backend maps to one contract and one argument type:
``ROW_BACKENDS`` is that mapping, for the matrix's rows and for ``check`` of a zoo file alike.
The zoo is imported by the functions that read it: importing it imports every entry's file, and
torch with them, which ``check`` (that imports this module for ``ROW_BACKENDS``) never needs.
"""

import json

from detectors import all_detectors, baseline_suites
from detectors.kit.needs import Needs, describe

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
    import zoo  # deferred: see the module docstring

    order = list(zoo.CATEGORIES)
    return order.index(category) if category in order else len(order)


def categories():
    """Every category in order: the zoo's, then any unknown one a bug names, sorted."""
    import zoo  # deferred: see the module docstring

    known = list(zoo.CATEGORIES)
    return known + sorted({e.meta.category for e in zoo.BUGS} - set(known))


def bugs():
    """The zoo's bugs in catalogue order."""
    import zoo  # deferred: see the module docstring

    return sorted(zoo.BUGS, key=lambda e: (category_rank(e.meta.category), e.id))


def decoys():
    import zoo  # deferred: see the module docstring

    return list(zoo.DECOYS)


def known_ids():
    return {e.id for e in bugs() + decoys()} | {"reference"}


def listing():
    """One dict per entry, as ``attnzoo list --json`` prints it."""
    return [
        {"id": e.id, "kind": "bug", "category": e.meta.category, "symptom": e.meta.symptom,
         "backends": list(e.backends), "title": e.meta.title, "depth": e.meta.depth}
        for e in bugs()
    ] + [
        {"id": e.id, "kind": "decoy", "category": "correct", "symptom": "-",
         "backends": list(e.backends), "title": e.meta.title, "depth": "-"}
        for e in decoys()
    ]


def listing_text(rows):
    w = max(len(r["id"]) for r in rows)
    lines = [f"{'id':<{w}}  {'category':<10} {'symptom':<7} {'backends':<17} {'shows at':<9}"
             " title"]
    for r in rows:
        lines.append(f"{r['id']:<{w}}  {r['category']:<10} {r['symptom']:<7} "
                     f"{','.join(r['backends']):<17} {r['depth']:<9} {r['title']}")
    n_bugs = sum(1 for r in rows if r["kind"] == "bug")
    lines.append(f"{n_bugs} bugs, {len(rows) - n_bugs} decoys")
    return "\n".join(lines)


def detectors_listing(as_json=False):
    """``attnzoo detectors``: each detector and baseline with its oracle, clauses, property
    and needs, as text or JSON."""
    rows = [{"name": d.NAME, "oracle": d.ORACLE, "clauses": list(d.CLAUSES),
             "property": d.PROPERTY, "needs": describe(getattr(d, "NEEDS", Needs()))}
            for d in all_detectors() + baseline_suites()]
    if as_json:
        return json.dumps(rows, indent=1, ensure_ascii=False)
    w = max(len(r["name"]) for r in rows)
    return "\n".join(f"{r['name']:<{w}}  {r['oracle']:<13} {','.join(r['clauses']):<16} "
                     f"{r['property']}\n{'':<{w}}  needs: {r['needs']}" for r in rows)
