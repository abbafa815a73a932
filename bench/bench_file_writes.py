"""progress_guard on a shell path that writes many distinct files: the per-call cost must not grow
with the number of files written (``MAX_NAMED_FILES`` bounds the files tracked one by one).

Each round writes one new file (``touch``), then checks and records a view of another file, the
pattern of a coding agent that writes a scratch file and reads the source, repeated past any
real run's size. Prints the wall time per round at each length and the ratio between the longest
and the shortest: linear cost gives a ratio near 1.

    python bench/bench_file_writes.py [--rounds 500,2000,8000]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

from detectors.guard import LoopGuard
from detectors.progress_guard import MAX_NAMED_FILES

OK = "<returncode>0</returncode>\n<output>\n</output>"
SHOWN = "<returncode>0</returncode>\n<output>\nx = 1\ny = 2\n</output>"


def per_round_us(rounds: int) -> float:
    g = LoopGuard(semantic=False, max_steps=10 ** 9)
    start = time.perf_counter()
    for i in range(rounds):
        g.record("bash", {"command": f"touch out{i}/f{i}.py"}, OK)
        view = {"command": f"sed -n '1,2p' src/m{i}.py"}
        g.check("bash", view)
        g.record("bash", view, SHOWN)
    return (time.perf_counter() - start) / rounds * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", default="500,2000,8000", help="comma-separated path lengths, in rounds")
    args = ap.parse_args()
    sizes = [int(x) for x in args.rounds.split(",")]
    print(f"{platform.processor() or platform.machine()}, load average {os.getloadavg()[0]:.2f}; "
          f"MAX_NAMED_FILES = {MAX_NAMED_FILES}")
    print("| rounds (a write and a view each) | µs per round |")
    print("|---|---|")
    costs = []
    for n in sizes:
        us = per_round_us(n)
        costs.append(us)
        print(f"| {n:,} | {us:,.0f} |")
    print(f"cost per round, longest path against shortest: x{costs[-1] / costs[0]:.2f} "
          f"({sizes[-1] // sizes[0]}x the rounds; linear total time gives about x1)")


if __name__ == "__main__":
    main()
