"""The worker process behind ``Isolated``: loads one target and answers requests until EOF.

Protocol over the socket given as argv[1]: the parent sends a Target, the worker answers
``("ready", manifest)`` or ``("bad", message)``; then for each Request it answers
``("ok", Result)`` or ``("fail", verdict, what)``.
"""

import sys
from multiprocessing.connection import Connection


def main(fd):
    conn = Connection(fd)
    target = conn.recv()
    from detectors.harness import probes
    from detectors.harness.target import BadTarget, load, manifest
    from detectors.harness.verdict import ImplementationFailure

    try:
        obj = load(target.locator)
        offered = manifest(obj, target)
    except BadTarget as e:
        conn.send(("bad", str(e)))
        return
    conn.send(("ready", offered))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        try:
            reply = ("ok", probes.execute(obj, target, offered, request))
        except ImplementationFailure as e:
            reply = ("fail", e.verdict, e.what)
        conn.send(reply)


if __name__ == "__main__":
    main(int(sys.argv[1]))
