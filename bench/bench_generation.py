"""Time to generate a suite's episodes (no detector runs): total, and per family.

Prints the episode count and the seconds of each family, the total episodes and tool
calls, and the load average before and after (other work on the machine slows it).

Run: python bench/bench_generation.py [--suite default] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import scenarios.families  # noqa: E402,F401
from scenarios.suites import load_suite  # noqa: E402
from sim.execute.runner import build_scenarios, generate_episodes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="default")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats; the fastest is reported")
    a = ap.parse_args()
    suite = load_suite(a.suite)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    per_family: dict[str, tuple[int, float]] = {}
    for fam in suite.families:
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            eps = generate_episodes(build_scenarios([fam], suite.episodes, suite.seed, suite.family_params,
                                                    suite.family_weights))
            best = min(best, time.perf_counter() - t0)
        per_family[fam] = (len(eps), best)
    best_total, n_eps, n_calls = float("inf"), 0, 0
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        eps = generate_episodes(build_scenarios(suite.families, suite.episodes, suite.seed, suite.family_params,
                                                suite.family_weights))
        best_total = min(best_total, time.perf_counter() - t0)
        n_eps, n_calls = len(eps), sum(len(e.tool_nodes()) for e in eps)
    print("| family | episodes | seconds |\n|---|---|---|")
    for fam, (n, s) in per_family.items():
        print(f"| {fam} | {n} | {s:.3f} |")
    print(f"suite {suite.name!r}: {n_eps} episodes, {n_calls} tool calls, generated in {best_total:.2f} s "
          f"(fastest of {a.repeat})")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
