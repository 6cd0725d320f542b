"""The worker process behind ``Isolated``: loads targets and answers requests until EOF.

Protocol over the socket given as argv[1], one message each way at a time:
``("describe", locator)`` → ``("described", info)`` | ``("bad", message)``;
``("infer", locator)`` → ``("inferred", "numpy" | "torch" | None)`` (runs the target's code);
``("target", Target)`` → ``("ready", Manifest)`` | ``("bad", message)``;
``("call", Request)`` → ``("ok", Result)`` | ``("fail", verdict, what)``.
"""

import sys
from multiprocessing.connection import Connection


def main(fd):
    conn = Connection(fd)
    from attnzoo.sandbox import probes
    from attnzoo.sandbox.target import BadTarget, describe, infer_backend, load, manifest
    from detectors.kit.verdict import ImplementationFailure

    loaded, target, offered = {}, None, None
    while True:
        try:
            verb, payload = conn.recv()
        except EOFError:
            return
        try:
            if verb == "describe":
                reply = ("described", describe(_load(loaded, payload, load), payload))
            elif verb == "infer":
                reply = ("inferred", infer_backend(_load(loaded, payload, load)))
            elif verb == "target":
                obj = _load(loaded, payload.locator, load)
                target, offered = payload, manifest(obj, payload)
                reply = ("ready", offered)
            else:
                obj = loaded[target.locator]
                reply = ("ok", probes.execute(obj, target, offered, payload))
        except BadTarget as e:
            reply = ("bad", str(e))
        except ImplementationFailure as e:
            reply = ("fail", e.verdict, e.what)
        conn.send(reply)


def _load(loaded, locator, load):
    if locator not in loaded:
        loaded[locator] = load(locator)
    return loaded[locator]


if __name__ == "__main__":
    main(int(sys.argv[1]))
