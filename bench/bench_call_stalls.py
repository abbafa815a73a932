"""Where a slow detector call's wall time goes: computing, or waiting off the CPU.

Scores the suite's episodes (open loop, in this process) with each detector and times every
``check`` + ``record`` twice: wall time (``time.perf_counter``) and the CPU time the calling
thread used (``time.thread_time``). It prints, per detector, the number of calls, the
longest call by wall time with the CPU it used, and how many calls took over 0.1 s and over
1 s of wall time against how many used that much CPU. On a quiet machine the two agree; run
it beside another run (``loopbench run`` in a second shell) to see what load does to them.

Run: python bench/bench_call_stalls.py [--suite default] [--detectors layered,exact] [--episodes N]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's code

from detectors.registry import make_detector  # noqa: E402
from scenarios.suites import load_suite  # noqa: E402
from sim.play.openloop import walk_tree  # noqa: E402
from sim.execute.runner import build_scenarios, generate_episodes  # noqa: E402


def timed_calls(det, episodes) -> list[tuple[float, float]]:
    """(wall seconds, CPU seconds) of every check + record, along each episode's tree."""
    wall, cpu = time.perf_counter, time.thread_time
    out = []

    def timed(state, node):
        w0, c0 = wall(), cpu()
        new_state = det.record(state, node.call, det.check(state, node.call), node.observation)
        out.append((wall() - w0, cpu() - c0))
        return new_state

    for ep in episodes:
        walk_tree(det, ep, timed)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="default")
    ap.add_argument("--detectors", default="layered,exact,no_progress")
    ap.add_argument("--episodes", type=int, default=None, help="per family (default: the suite's)")
    args = ap.parse_args(argv)
    suite = load_suite(args.suite)
    scenarios = build_scenarios(suite.families, args.episodes or suite.episodes, suite.seed, suite.family_params,
                                suite.family_weights)
    episodes = generate_episodes(scenarios)
    print(f"suite {args.suite}: {len(episodes)} episodes; cpus={os.cpu_count()}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'detector':<16}{'calls':>8}{'longest wall s':>16}{'its CPU s':>11}"
          f"{'wall>0.1s':>11}{'CPU>0.1s':>10}{'wall>1s':>9}{'CPU>1s':>8}")
    for name in args.detectors.split(","):
        calls = timed_calls(make_detector(name), episodes)
        worst = max(calls)
        print(f"{name:<16}{len(calls):>8}{worst[0]:>16.4f}{worst[1]:>11.4f}"
              f"{sum(w > 0.1 for w, _ in calls):>11}{sum(c > 0.1 for _, c in calls):>10}"
              f"{sum(w > 1 for w, _ in calls):>9}{sum(c > 1 for _, c in calls):>8}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
