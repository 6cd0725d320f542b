"""The worker process behind ``Isolated``: loads targets and answers requests until EOF.

It speaks :mod:`attnzoo.sandbox.wire` over the socket whose descriptor is argv[1] (JSON
headers, raw buffers, never a pickle), one message each way at a time:
``{"verb": "describe", "locator"}`` → ``{"described": info}`` | ``{"bad": message}``;
``{"verb": "infer", "locator"}`` → ``{"inferred": "numpy" | "torch" | None}`` (runs the
target's code); ``{"verb": "target", "target": fields}`` → ``{"ready": facts}``
(:func:`offer.facts`: the parent decides the manifest) | ``{"bad": message}``;
``{"verb": "call", ...request}`` → a reply of raw arrays (:func:`probes.execute`; a gradcheck
as the raw data of :func:`gradcheck.collect`) | ``{"fail": verdict, "what": text}``.
``{"verb": "reread", "handle"}`` → the answers a call with ``"keep"`` returned, as their storage
holds them now.
``{"verb": "relay", "locator", "contract", "canary"}`` turns the worker into a relay for one
implementation (:mod:`attnzoo.sandbox.relay`, the other end of ``attnzoo grade``'s proxy): its
first reply is ``{"relaying": {"functions"}}`` | ``{"bad"}``, and it answers only the proxy's
messages from then on.
A call's ``"refill"`` and ``"overwrite"`` name a call kept with ``"keep"``, whose argument
objects it reuses or whose answers it writes into first (:mod:`attnzoo.sandbox.caller`).
Nothing here decides a verdict: the parent reads every reply as untrusted data.
"""

import socket
import sys

from attnzoo.sandbox import lifeline


def main(fd):
    lifeline.die_with_parent()
    sock = socket.socket(fileno=fd)
    # imported once the worker is tied to attnzoo: started alone, this is where it spends its
    # seconds importing numpy and torch (a forked one has them from the server already)
    from attnzoo.sandbox import decide, offer, probes, wire
    from attnzoo.sandbox.target import BadTarget, Target, describe, infer_backend, load
    from detectors.kit.verdict import ImplementationFailure

    loaded, target, kept = {}, None, {}
    while True:
        try:
            header, buffers = wire.read(sock)
        except EOFError:
            return
        verb, out = header.get("verb"), []
        if verb == "relay":
            from attnzoo.sandbox import relay

            return relay.serve(sock, header)
        try:
            if verb == "describe":
                reply = {"described": describe(_load(loaded, header["locator"], load),
                                               header["locator"])}
            elif verb == "infer":
                reply = {"inferred": infer_backend(_load(loaded, header["locator"], load))}
            elif verb == "target":
                target = Target(**header["target"])
                reply = {"ready": offer.facts(_load(loaded, target.locator, load), target)}
            elif verb == "reread":
                reply, out = probes.reread(target, kept, header.get("handle"))
            else:
                request = decide.for_worker(header, buffers)
                reply, out = probes.execute(loaded[target.locator], target, None, request, kept)
        except BadTarget as e:
            reply = {"bad": str(e)}
        except ImplementationFailure as e:
            reply = {"fail": e.verdict, "what": e.what}
        wire.send(sock, reply, out)


def _load(loaded, locator, load):
    if locator not in loaded:
        loaded[locator] = load(locator)
    return loaded[locator]


if __name__ == "__main__":
    main(int(sys.argv[1]))
