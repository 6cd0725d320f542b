"""``attnzoo check --contract varlen``: the varlen detectors on anyone's packed, paged kernel.

The kernel is untrusted, so it never runs in attnzoo's process. It is loaded in a worker of its
own, confined as ``check``'s SDPA workers are (``--isolation``, ``--memory-limit``), and turned
into a relay (:mod:`attnzoo.sandbox.relay`). The detectors of ``detectors/varlen/`` run here,
against a proxy whose calls go to that worker and whose answers come back as tensors of the
same dtype, shape and strides (:mod:`attnzoo.grade.proxy`): what the kernel writes into an
argument is written back, so "inputs untouched" is judged as for a direct call. Each call is
time-limited (``--timeout``, the first one ``--warmup``): a call with no answer in time is a
*hang*, a worker that dies (a segfault, ``os._exit``) is a *crash*, both for the detector that
was running, and the next detector gets a new worker. A raise, a wrong shape or dtype and a
wrong value are what :class:`detectors.kit.varlen.Subject` makes of them. Every worker is
killed, with whatever it started, before the run returns.

:func:`run` returns the report as the JSON document ``--json`` prints, in the vocabulary of
``check``'s SDPA report (:mod:`attnzoo.report`); :func:`text` prints it.
"""

import dataclasses
import os
import sys
import time

from attnzoo.grade.proxy import Connection, Gone
from attnzoo.inert import inert
from attnzoo.options import VARLEN_EMPTY_ROWS, WINDOW_COUNTINGS, BadInput, Options
from attnzoo.sandbox import hygiene, session, wire
from detectors.kit.verdict import (
    CRASHED,
    ERROR,
    HUNG,
    KILLED,
    NA,
    SURVIVED,
    UNSUPPORTED,
    NotApplicable,
)

CONTRACT = "varlen"
DEFAULT_ALIGNMENT = "bottom-right"  # V3: the contract's diagonal
# every keyword the harness passes (detectors.kit.varlen.Subject.run): a target must take each
KEYWORDS = ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "seqused_k",
            "block_table", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes",
            "return_lse")
SIGNATURE = ("attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k=None, *, max_seqlen_q, "
             "max_seqlen_k, seqused_k=None, block_table=None, softmax_scale=None, causal=False, "
             "window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False)")
# options of check the varlen harness has no use for: (field, its unset value, why)
NOT_TAKEN = (
    ("backend", None, "--backend is the lesson contract's; varlen targets take torch tensors"),
    ("mask_convention", "keep", "--mask-convention is SDPA's; varlen has no mask argument"),
    ("refuses", (), "--refuses is SDPA's"),
    ("expect", None, "--expect reads SDPA detectors' expectations"),
    ("repro_dir", None, "--repro-dir writes SDPA reproductions"),
    ("budget", None, "--budget orders SDPA's measured units; use --deadline or --only"),
    ("device", "cpu", "--device: the varlen cases are built on the CPU"),
)


DEADLINE = "deadline"  # a Lost of this kind ends the run: the detectors left are not run


class Lost(BaseException):
    """The worker gave no answer: it hung, died, or the deadline passed. A BaseException, so
    that no ``except Exception`` of the harness takes it for the kernel's own raise."""

    def __init__(self, verdict, message):
        super().__init__(message)
        self.verdict, self.message = verdict, message


@dataclasses.dataclass
class Finding:
    """One detector's verdict on the kernel, as check's findings are spelt."""

    detector: str
    verdict: str
    message: str = ""
    dtype: str = ""
    case: str = ""
    calls: int = 0
    seconds: float = 0.0
    impl_seconds: float = 0.0
    unsupported: tuple = ()
    notes: tuple = ()
    evidence: object = None
    lost: bool = False  # its worker hung or died: the next detector needs a new one

    @property
    def caught(self):
        from detectors.kit.verdict import Verdict

        return Verdict(self.verdict).caught

    def to_json(self):
        return {"detector": self.detector, "verdict": str(self.verdict),
                "message": self.message, "dtype": self.dtype or None,
                "evidence": {"case": self.case} if self.case else None, "calls": self.calls,
                "seconds": round(self.seconds, 3), "impl_seconds": round(self.impl_seconds, 3),
                "unsupported": list(self.unsupported), "notes": list(self.notes)}


# -- options ------------------------------------------------------------------------------------


def detectors_named(only):
    """The varlen detectors, or those named (each once, in the order given); BadInput names an
    unknown one and lists the known."""
    from detectors import varlen_detectors

    found = {d.NAME: d for d in varlen_detectors()}
    unknown = [n for n in only or () if n not in found]
    if unknown:
        raise BadInput(f"unknown varlen detector {unknown[0]!r}: choose from "
                       f"{', '.join(found)}")
    return [found[n] for n in dict.fromkeys(only)] if only else list(found.values())


def options(**values):
    """Options for a varlen check, and the detectors chosen: ``values`` as
    :meth:`Options.build` takes them; what varlen has no use for is BadInput, one line."""
    for name, unset, why in NOT_TAKEN:
        value = values.get(name, unset)
        if value is not None and value != unset and not (
                isinstance(value, (str, list, tuple)) and not value):
            raise BadInput(f"{why}: drop it for --contract varlen")
    if values.get("depth") is None:
        values.pop("depth", None)
    empty_rows = convention("--empty-rows", values.pop("empty_rows", None), VARLEN_EMPTY_ROWS)
    counting = convention("--window-counting", values.pop("window_counting", None),
                          WINDOW_COUNTINGS)
    lacks = unsupported(values.pop("unsupported", None))
    chosen = detectors_named(values.pop("only", None) or ())
    if values.get("causal_alignment") is None:
        values["causal_alignment"] = DEFAULT_ALIGNMENT
    built = Options.build(**values)
    return dataclasses.replace(built, only=tuple(d.NAME for d in chosen), empty_rows=empty_rows,
                               window_counting=counting, unsupported=lacks), chosen


def unsupported(words):
    """The varlen vocabulary's words a target declares it lacks (``--unsupported``'s text or a
    sequence); "help" lists the vocabulary. BadInput names an unknown word."""
    from detectors.kit.varlen_capabilities import VOCABULARY, parse

    text = words if isinstance(words, str) else ",".join(words or ())
    if text.strip() == "help":
        raise BadInput("--unsupported takes, for --contract varlen, a comma-separated list of: "
                       + "; ".join(f"{k} ({v})" for k, v in VOCABULARY.items()))
    try:
        return parse(text)
    except ValueError as e:
        raise BadInput(f"--unsupported: {e}") from None


def convention(option, value, spellings):
    """The harness's name (detectors.kit.varlen.Target) of a declared convention, given in the
    command line's spelling or the harness's own; None is the contract's (the first)."""
    if value is None:
        return next(iter(spellings.values()))
    if value in spellings.values():
        return value
    if value not in spellings:
        raise BadInput(f"{option} must be one of {', '.join(spellings)} for --contract varlen, "
                       f"not {value!r}")
    return spellings[value]


def declarations(data, locator):
    """What a kernel's module declares (its worker's data, untrusted): ``{"unsupported": words,
    "empty_rows": convention or None, "window_counting": convention or None}``; BadInput, one
    line, for a declaration that is not one of the words its option takes."""
    from detectors.kit.varlen_capabilities import parse

    if not isinstance(data, dict):
        raise BadInput(f"{locator}: its worker sent no declarations: fix the module")

    def strings(name):  # (its strings, whether it was one bare string); ([], False): absent
        value = data.get(name)
        found = value.get("strings") if isinstance(value, dict) else None
        if not (isinstance(found, list) and all(isinstance(w, str) for w in found)):
            return None, None
        return found, value.get("single") is True

    out = {}
    for name, key, spellings in (("ATTNZOO_EMPTY_ROWS", "empty_rows", VARLEN_EMPTY_ROWS),
                                 ("ATTNZOO_WINDOW_COUNTING", "window_counting", WINDOW_COUNTINGS)):
        words, single = strings(name)
        if words == [] and single is False:
            out[key] = None
        elif single and words[0] in spellings:
            out[key] = spellings[words[0]]
        elif single and words[0] in spellings.values():
            out[key] = words[0]
        else:
            raise BadInput(f"{locator}: {name} must be one of "
                           f"{', '.join(repr(w) for w in spellings)} (a string)")
    words, _ = strings("ATTNZOO_UNSUPPORTED")
    if words is None:
        raise BadInput(f"{locator}: ATTNZOO_UNSUPPORTED must be a tuple of strings")
    try:
        out["unsupported"] = parse(words)
    except ValueError as e:
        raise BadInput(f"{locator}: ATTNZOO_UNSUPPORTED: {inert(str(e))}") from None
    return out


def declared_by(options, worker):
    """``options`` with what the kernel's module declares: the words it lacks added to
    ``--unsupported``'s, and its conventions where the command line left the contract's."""
    from detectors.kit.varlen_capabilities import parse

    found = worker.declared
    empty, counting = options.empty_rows, options.window_counting
    if empty == next(iter(VARLEN_EMPTY_ROWS.values())) and found["empty_rows"]:
        empty = found["empty_rows"]
    if counting == next(iter(WINDOW_COUNTINGS.values())) and found["window_counting"]:
        counting = found["window_counting"]
    return dataclasses.replace(options, empty_rows=empty, window_counting=counting,
                               unsupported=parse(options.unsupported + found["unsupported"]))


def from_args(args):
    """(options, detectors) from check's parsed command line."""
    fields = {f.name for f in dataclasses.fields(Options)}
    given = {n: getattr(args, n) for n in fields if hasattr(args, n)}
    if given.get("shrink") is False:
        given.pop("shrink")  # --no-shrink: varlen reports each failing case as found anyway
    return options(**given)


def dtypes(options):
    """The dtypes of the run: the one --dtype names, else every float dtype of the contract."""
    from reference import FLOAT_DTYPES

    return (options.dtype,) if options.dtype else FLOAT_DTYPES


# -- the kernel's worker ------------------------------------------------------------------------


class Worker:
    """The kernel in a confined worker, turned into a relay; its calls time-limited."""

    def __init__(self, locator, options, deadline):
        self.options, self.deadline = options, deadline
        self.proc = self.capture = self.connection = None
        self.first = True
        self.impl_seconds = 0.0
        ours, theirs = wire.pair()
        try:
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            self.proc, self.capture = hygiene.spawn(theirs.fileno(), env,
                                                    session.isolation(options))
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        try:
            wire.send(ours, {"verb": "relay", "locator": locator, "contract": CONTRACT})
            reply = self._reply(options.import_timeout, "the import", "--import-timeout")
        except BaseException:
            self.close()
            raise
        if "bad" in reply:
            self.close()
            raise BadInput(inert(str(reply["bad"]))[:500])
        found = reply.get("relaying")
        if not isinstance(found, dict) or found.get("functions") != ["__call__"]:
            self.close()
            raise BadInput(f"{locator} is not callable: name a function with the varlen "
                           f"signature, {SIGNATURE}")
        self.parameters = found.get("parameters")
        try:
            self.declared = declarations(found.get("declared"), locator)
        except BadInput:
            self.close()
            raise
        self.connection = Timed(self, ours)

    def _reply(self, seconds, doing, option="--timeout"):
        """The worker's next message within ``seconds`` (its output drained meanwhile);
        ``doing`` and ``option`` say what it was doing and which option gave it the time."""
        left = None if self.deadline is None else self.deadline - time.monotonic()
        limit = seconds if left is None else max(0.0, min(seconds, left))
        if not hygiene.wait_readable(self.sock, self.capture, limit):
            if left is not None and left <= seconds:
                raise Lost(DEADLINE, "the deadline passed")
            raise Lost(HUNG, f"no answer within {seconds:g} s during {doing} ({option}); the "
                       "worker was killed")
        try:
            reply, got = wire.read(self.sock, seconds)
        except (EOFError, OSError, wire.Malformed):
            raise Lost(CRASHED, f"the worker died during {doing}: {self.how()}") from None
        self.buffers = got
        if not isinstance(reply, dict):
            raise Lost(CRASHED, "the worker broke the relay's protocol")
        return reply

    def how(self):
        """How the worker ended, and the first line it printed, as a clause."""
        import signal

        try:
            code = self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001 - still alive: it closed its end of the connection
            code = None
        self.capture.drain()
        said = inert(self.capture.first_line())[:200]
        if code is None:
            why = "it closed its connection"
        elif code < 0:
            why = f"killed by {signal.Signals(-code).name}"
        else:
            why = f"it exited with code {code}"
        return why + (f" (it printed: {said})" if said else "")

    def lacks(self):
        """The harness's keywords the kernel's signature cannot take (none with ``**kwargs``,
        or when the signature cannot be read)."""
        params = self.parameters
        if not isinstance(params, list):
            return []
        kinds = {p[0]: p[1] for p in params if isinstance(p, list) and len(p) == 2}
        if "VAR_KEYWORD" in kinds.values():
            return []
        named = {n for n, k in kinds.items() if k in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")}
        positional = [n for n, k in kinds.items() if k != "VAR_KEYWORD"]
        if "VAR_POSITIONAL" not in kinds.values() and len(positional) < 3:
            return ["q, k, v"]
        return [inert(k) for k in KEYWORDS if k not in named]

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            hygiene.kill(self.proc)
            self.capture.drain()
            self.capture.stream.close()
            self.proc = None


class Timed(Connection):
    """The proxy's connection with a time limit per message: a lost worker raises
    :class:`Lost`, never waits."""

    def __init__(self, worker, sock):
        super().__init__(sock, ["__call__"], "torch")
        self.worker = worker

    def _exchange(self, header, buffers=()):
        w = self.worker
        self._used = True
        start = time.perf_counter()
        try:
            self._sock.settimeout(None)
            wire.send(self._sock, header, buffers)
        except OSError:
            raise Lost(CRASHED, f"the worker died: {w.how()}") from None
        first = w.first and header.get("op") == "call"
        limit = w.options.warmup if first else w.options.timeout
        try:
            reply = w._reply(limit, "the first call" if first else "a call",
                             "--warmup" if first else "--timeout")
        finally:
            w.impl_seconds += time.perf_counter() - start
        if header.get("op") == "call":
            w.first = False
        return reply, w.buffers


# -- the run --------------------------------------------------------------------------------------


def run(locator, options, chosen, *, name=None, progress=None):
    """Run ``chosen`` varlen detectors on the kernel ``locator`` names: (document, exit code).

    ``options`` and ``chosen`` come from :func:`options`; ``name`` is what the report calls a
    target given as a function or source (attnzoo.api). Bad input raises BadInput.
    """
    from attnzoo.checking import precheck
    from attnzoo.progress import Progress
    from attnzoo.report import INCOMPLETE, SCHEMA, summarise

    precheck(locator)
    hygiene.install()
    if options.isolation_fallback:
        print(f"attnzoo: {session.fallback_line(options)}", file=sys.stderr)
    progress = Progress() if progress is None else progress
    began = time.perf_counter()
    deadline = time.monotonic() + options.deadline if options.deadline else None
    findings, not_run, stopped = [], [], None
    worker = None
    try:
        try:
            worker = start(locator, options, deadline)
            options = declared_by(options, worker)
        except Lost:  # the deadline passed while it imported: nothing ran
            worker, stopped = None, session.DEADLINE
        with session.one_blas_thread():
            for i, detector in enumerate(chosen):
                progress.detector(i + 1, len(chosen), detector.NAME)
                if stopped is None and deadline is not None and time.monotonic() > deadline:
                    stopped = session.DEADLINE
                if stopped is not None:
                    not_run.append(detector.NAME)
                    continue
                if worker is None:
                    worker = start(locator, options, deadline)
                    options = declared_by(options, worker)
                finding = one(detector, worker, options, name or locator, progress.call)
                if finding is None:  # the deadline passed during it
                    stopped = session.DEADLINE
                    not_run.append(detector.NAME)
                    worker.close()
                    worker = None
                    continue
                findings.append(finding)
                if finding.lost:
                    worker.close()
                    worker = None
                if options.exitfirst and finding.caught and i + 1 < len(chosen):
                    stopped = session.FIRST_FLAG
    finally:
        progress.done()
        if worker is not None:
            worker.close()
    summary = summarise(findings, not_run)
    code = 1 if summary["flagged"] else 3 if summary["errors"] else \
        INCOMPLETE if not_run and stopped == session.DEADLINE else 0
    target = {"name": name or locator, "locator": locator, "contract": CONTRACT,
              "backend": "torch", "causal_alignment": options.causal_alignment,
              "empty_rows": options.empty_rows, "window_counting": options.window_counting,
              "unsupported": list(options.unsupported), "device": "cpu",
              "dtype": options.dtype, "dtypes": list(dtypes(options)), "seed": options.seed}
    return {
        "schema": SCHEMA,
        "command": "check",
        "contract": CONTRACT,
        "target": locator,
        "depth": options.depth,
        "deadline": options.deadline or None,
        "budget": None,
        "stopped": stopped,
        "isolation": session.isolation_json(options),
        "implementations": [{"target": target, "summary": summary, "diagnosis": [],
                             "resembles": [], "findings": [f.to_json() for f in findings],
                             "not_run": not_run, "stopped": stopped}],
        "summary": summary,
        "seconds": round(time.perf_counter() - began, 3),
        "exit_code": code,
    }, code


def start(locator, options, deadline=None):
    """A worker for the kernel; BadInput when it does not import in time, or its signature
    cannot take the harness's calls; :class:`Lost` when the deadline passes first."""
    try:
        worker = Worker(locator, options, deadline)
    except Lost as lost:
        if lost.verdict == DEADLINE:
            raise
        raise BadInput(f"{locator}: {lost.message}: fix the module, or raise --import-timeout "
                       "if it is only slow") from None
    lacks = worker.lacks()
    if lacks:
        worker.close()
        raise BadInput(f"{locator}'s signature lacks {', '.join(lacks)}: a varlen target takes "
                       f"flash-attention's {SIGNATURE} (docs/varlen.md)")
    return worker


def one(detector, worker, options, name, on_call=None):
    """The detector's finding at each dtype in turn, the first failing dtype's when one fails;
    None when the deadline passed during it. ``on_call()`` is told of each call."""
    from detectors.kit import varlen

    proxy = _callable(worker.connection, on_call)
    target = varlen.Target(fn=proxy, name=name, causal_alignment=options.causal_alignment,
                           empty_rows=options.empty_rows, window_counting=options.window_counting,
                           unsupported=options.unsupported)
    began, calls, impl = time.perf_counter(), 0, worker.impl_seconds
    aside, plain = {}, {}  # over the dtypes: cases set aside, cases run without a feature

    def done(verdict, message="", dtype="", case="", lost=False):
        words = sorted({w for found in plain.values() for w in found.split(", ")})
        notes = [f"{len(plain)} case{'s' if len(plain) != 1 else ''} run without "
                 f"{', '.join(words)}"] if plain else []
        return Finding(detector.NAME, verdict, inert(message, lines=True), dtype, inert(case),
                       calls, time.perf_counter() - began, worker.impl_seconds - impl,
                       unsupported=tuple(aside), notes=tuple(notes), lost=lost)

    for dtype in dtypes(options):
        subject = varlen.Subject(target, varlen.DTYPES[dtype], options.seed, options.depth)
        subject.set_aside, subject.without = aside, plain  # one record over the dtypes
        try:
            worker.connection.fresh()  # a new instance of a callable object's class
            detector.check(subject)
        except Lost as lost:
            calls += len(subject.calls)
            if lost.verdict == DEADLINE:
                return None
            case = subject.calls[-1].name if subject.calls else ""
            return done(lost.verdict, f"{dtype}: {case}: {lost.message}", dtype, case, True)
        except varlen.SetAside as why:  # what it needs is declared unsupported
            calls += len(subject.calls)
            return done(UNSUPPORTED, f"{dtype}: {why}", dtype)
        except NotApplicable as why:  # the property needs what the kernel lacks (autograd)
            calls += len(subject.calls)
            return done(NA, f"{dtype}: {why}", dtype)
        except Gone as gone:  # the worker died answering a backward
            calls += len(subject.calls)
            case = subject.calls[-1].name if subject.calls else ""
            return done(CRASHED, f"{dtype}: {case}: {gone}", dtype, case, True)
        except varlen.VarlenMismatch as mismatch:
            calls += len(subject.calls)
            case = subject.calls[-1].name if subject.calls else ""
            raised = mismatch.__cause__ is not None  # Subject.run: the kernel raised
            return done(CRASHED if raised else KILLED, f"{dtype}: {mismatch}", dtype, case)
        except Exception as error:  # noqa: BLE001 - the detector itself failed: never a verdict
            calls += len(subject.calls)
            return done(ERROR, f"{dtype}: the detector failed ({type(error).__name__}: {error}):"
                        " a bug in attnzoo, not a verdict on the target", dtype)
        calls += len(subject.calls)
        if varlen.vacuous(subject):
            return done(UNSUPPORTED, f"{dtype}: {varlen.vacuous(subject)}", dtype)
    return done(SURVIVED)


def _callable(connection, on_call=None):
    """What the detectors call: the kernel, through the relay. What the relay brings back as
    an exception that is not an Exception (the kernel's SystemExit) is a raise like any
    other; a gone worker is :class:`Lost`."""
    def kernel(q, k, v, *args, **kwargs):
        if on_call is not None:
            on_call()
        try:
            answer = connection.call("__call__", (q, k, v) + args, kwargs)
        except (Lost, Exception) as e:
            if isinstance(e, Gone):
                raise Lost(CRASHED, str(e)) from None
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - relayed from the kernel: SystemExit et al.
            raise RuntimeError(f"{type(e).__name__}: {e}") from None
        if kwargs.get("return_lse") and not (isinstance(answer, (tuple, list))
                                             and len(answer) == 2):
            return answer, None  # not a pair: the Subject says what out should have been
        return answer

    return kernel


# -- the report ---------------------------------------------------------------------------------


def text(document, chosen, verbose=False):
    """What ``attnzoo check --contract varlen`` prints without --json."""
    from attnzoo.report import WORDS

    props = {d.NAME: getattr(d, "PROPERTY", "") for d in chosen}
    impl = document["implementations"][0]
    t, s = impl["target"], impl["summary"]
    lines = [session.isolation_words(_Shown(document["isolation"])),
             f"{t['name']}: varlen contract, causal alignment {t['causal_alignment']}, "
             f"empty rows {t['empty_rows']}, window counting {t['window_counting']}, "
             f"{', '.join(t['dtypes'])}, depth {document['depth']}, seed {t['seed']}"]
    if t.get("unsupported"):
        lines.append(f"  declared unsupported: {', '.join(t['unsupported'])} (cases that use "
                     "them are run without them where they can be taken out, else set aside"
                     + ("" if verbose else "; -v lists them per detector") + ")")
    width = max((len(f["detector"]) for f in impl["findings"]), default=0)
    said = max((len(WORDS[f["verdict"]]) for f in impl["findings"]), default=7)
    for f in impl["findings"]:
        lines.append(f"  {WORDS[f['verdict']]:<{max(7, said)}} {f['detector']:<{width}}  "
                     f"{props.get(f['detector'], '')}")
        if f["verdict"] != "survived" or verbose and f["message"]:
            lines += [f"          {line}" for line in f["message"].splitlines()]
        if verbose and f.get("unsupported"):
            n = len(f["unsupported"])
            lines.append(f"          {n} case{'s' if n != 1 else ''} set aside: "
                         + "; ".join(f["unsupported"]))
        if verbose:
            lines += [f"          note: {note}" for note in f.get("notes") or ()]
    for n in impl["not_run"]:
        lines.append(f"  {'not run':<7} {n:<{width}}  {props.get(n, '')}")
    parts = [f"{s['passed']} passed", f"{s['flagged']} flagged"]
    detail = [f"{s[k]} {k}" for k in ("crashed", "hung") if s[k]]
    if detail:
        parts[-1] += f" ({', '.join(detail)})"
    if s.get("unsupported"):
        parts.append(f"{s['unsupported']} unsupported")
    if s["errors"]:
        parts.append(f"{s['errors']} detector error" + ("s" if s["errors"] != 1 else ""))
    if s["not_run"]:
        parts.append(f"{s['not_run']} not run")
    if s["flagged"]:
        verdict = "NOT conformant"
    elif impl["not_run"] and document["stopped"] == "deadline":
        verdict = f"incomplete: the deadline passed before {', '.join(impl['not_run'])} ran"
    elif s["errors"]:
        verdict = "no verdict: a detector failed"
    elif not s["passed"]:
        verdict = "no verdict: nothing was judged (no detector applied)"
    else:
        verdict = "conformant"
    lines.append(f"summary: {', '.join(parts)} in {document['seconds']:.1f} s — {verdict}")
    return "\n".join(lines)


class _Shown:
    """The isolation fields as isolation_words reads them from Options."""

    def __init__(self, isolation):
        self.isolation = isolation["level"]
        self.memory_limit = isolation["memory_limit"]
        self.scratch_limit = isolation["scratch_limit"]
        self.isolation_fallback = isolation["fallback"]


def main(args):
    """``attnzoo check --contract varlen``: print the report, return the exit code."""
    import json

    from attnzoo.streams import deliver

    opts, chosen = from_args(args)
    document, code = run(args.target, opts, chosen)
    out = json.dumps(document, indent=1, ensure_ascii=False) if args.json else \
        text(document, chosen, args.verbose)
    return deliver(out, code)
