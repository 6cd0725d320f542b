"""What the diagnosis costs: ``attnzoo check`` with and without following flagged detectors.

``python -m attnzoo.devtools.follow_cost LOCATOR [--depth standard] [--repeats 2]`` runs the
check alternately without and with ``follow`` (``attnzoo.diagnosis.follow``) and prints each
run's wall time, the calls made into the implementation and the root causes found, then the
median walls. A target nothing flags pays nothing: the calls are the same.
"""

import argparse
import statistics
import time

from attnzoo.check import run_check


def measure(locator, depth, repeats):
    walls = {False: [], True: []}
    for _ in range(repeats):
        for follow in (False, True):
            start = time.perf_counter()
            sections, _, _, _ = run_check(locator, depth=depth, follow=follow)
            walls[follow].append(time.perf_counter() - start)
            calls = sum(f.calls for s in sections for f in s["findings"])
            causes = [g["feature"] for s in sections for g in s["diagnosis"]]
            print(f"follow={follow!s:<5} wall {walls[follow][-1]:6.1f} s  calls {calls:6d}  "
                  f"root causes {causes}")
    before, after = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"median wall: {before:.1f} s without, {after:.1f} s with ({after / before:.2f}x)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m attnzoo.devtools.follow_cost")
    parser.add_argument("locator")
    parser.add_argument("--depth", default="standard", choices=("quick", "standard", "deep"))
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    measure(args.locator, args.depth, args.repeats)


if __name__ == "__main__":
    main()
