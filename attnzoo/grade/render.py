"""What ``attnzoo grade`` prints: false alarms first, the matrix, each test's catches, survivors.

Everything here reads the grade document of :mod:`attnzoo.grade.model` (already hidden with
``model.hide`` unless ``--reveal``), so the text and ``--json`` never disagree.
"""

import textwrap

from attnzoo.grade.model import GLYPHS

TEXT_LINES = 25  # lines of pytest's failure text shown per false alarm


def short_names(tests):
    """Test ids without the file part when they all come from one file."""
    files = {t.split("::", 1)[0] for t in tests}
    if len(files) == 1:
        return {t: t.split("::", 1)[1] if "::" in t else t for t in tests}
    return {t: t for t in tests}


def score_line(doc):
    s = doc["summary"]
    alarms = s["false_alarms"]
    return (f"caught {s['caught']}/{s['bugs']} bugs, {alarms} false alarm"
            + ("" if alarms == 1 else "s"))


def text(doc, min_caught=0):
    tests = list(doc["tests"])
    name = short_names(tests)
    s = doc["summary"]
    contracts = " and ".join("SDPA contract" if c == "sdpa" else "varlen contract"
                             if c == "varlen" else f"lesson contract on {doc['backend']}"
                             for c in doc["contracts"])
    out = [f"grade of {doc['path']}: {s['tests']} tests, {contracts}, "
           f"{s['implementations']} implementations", ""]
    out += false_alarm_lines(doc, name)
    out += matrix_lines(doc, tests, name)
    out += test_lines(doc, tests, name)
    out += survivor_lines(doc)
    line = score_line(doc)
    if min_caught:
        met = s["caught"] >= min_caught
        line += f" (--min-caught {min_caught}: {'met' if met else 'not met'})"
    out.append(line)
    return "\n".join(out)


def false_alarm_lines(doc, name):
    alarms = doc["false_alarms"]
    if not alarms:
        return ["false alarms: none: every test passes on the reference and every decoy", ""]
    out = [f"FALSE ALARMS ({len(alarms)}): a correct implementation fails these tests; "
           "fix them first"]
    if any(a.get("canary") for a in alarms):
        out.append("  (a canary is the reference dressed as a bug: its class, module, file and "
                   "method source are the bug's, its answers correct; a test failing on it "
                   "judged the implementation by what it is called, not by what it returns)")
    for a in alarms:
        how = a["outcome"] + (f" ({a['exception']})" if a["exception"] else "")
        out.append(f"  {GLYPHS['false'][0]} {name[a['test']]} on {a['implementation']}: {how}")
        lines = a["text"].rstrip().splitlines()
        shown = lines[-TEXT_LINES:]
        if len(lines) > len(shown):
            out.append(f"      … {len(lines) - len(shown)} lines above cut")
        out += ["      " + ln for ln in shown]
    return out + [""]


def matrix_lines(doc, tests, name):
    cols = [str(i + 1) for i in range(len(tests))]
    width = max(len(r["row"]) for r in doc["rows"]) + 2
    colw = max(2, max(len(c) for c in cols))
    head = " " * width + " ".join(f"{c:>{colw}}" for c in cols)
    out = ["tests × implementations (rows: implementation-backend; columns: tests)", head]
    group = None
    for r in doc["rows"]:
        g = {"bug": r["category"], "reference": "the reference",
             "decoy": "decoys: correct, written differently"}[r["kind"]]
        if g != group:
            group = g
            out.append(f"-- {g} " + "-" * max(3, len(head) - len(g) - 4))
        marks = [GLYPHS[r["cells"][t]["cell"]][0] for t in tests]
        out.append(f"{r['row']:<{width}}" + " ".join(f"{m:>{colw}}" for m in marks))
    out.append("")
    out.append("legend: " + "   ".join(f"{s} {m}" for s, m in GLYPHS.values()))
    out.append("columns: " + ", ".join(f"{c} {name[t]}" for c, t in zip(cols, tests)))
    return out + [""]


def test_lines(doc, tests, name):
    out = ["what each test catches: the bugs no other test catches (alone), and the others"]
    width = max(len(name[t]) for t in tests)
    hidden = {b["id"] for b in doc["bugs"] if not b["caught"]}
    for i, t in enumerate(tests):
        info = doc["tests"][t]
        caught = [b for b in info["catches"] if b not in hidden]
        line = f"  {i + 1:>2} {name[t]:<{width}}  {len(caught):>2} bugs, {len(info['only'])} alone"
        if info["false_alarms"]:
            line += f", {info['false_alarms']} FALSE ALARMS"
        out.append(line)
        others = [b for b in caught if b not in info["only"]]
        if info["only"]:
            out += textwrap.wrap(", ".join(info["only"]), 96, initial_indent="       alone: ",
                                 subsequent_indent=" " * 14, break_on_hyphens=False)
        if others:
            out += textwrap.wrap(", ".join(others), 96, initial_indent="       also:  ",
                                 subsequent_indent=" " * 14, break_on_hyphens=False)
    return out + [""]


def survivor_lines(doc):
    survivors = [b for b in doc["bugs"] if not b["caught"]]
    if not survivors:
        return ["survivors: none: every bug fails at least one test", ""]
    revealed = not survivors[0]["id"].startswith("survivor-")
    out = [f"survivors ({len(survivors)}): no test fails on these"
           + ("" if revealed else "; find the mistake each makes and write the test that "
              "shows it ('--reveal' names them)")]
    width = max(len(b["id"]) for b in survivors)
    for b in survivors:
        where = f"  ({', '.join(r.rsplit('-', 1)[1] for r in b['rows'])})" if revealed else ""
        out.append(f"  {b['id']:<{width}}  {b['category']:<10} hint: {b['lesson']}{where}")
    return out + [""]
