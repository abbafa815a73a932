"""Cost of sweeping a detector's threshold over 50 values, against one evaluation.

A detector with a ``threshold_param`` alarms on a call iff
``score >= threshold_for(tool, value)`` and its score does not depend on the value, so a
sweep needs the detector run once (per-call scores) and then only re-scores outcomes.

- single evaluation: what the runner does for one detector in open loop: score every
  episode of the suite (``run_open``) and turn the verdicts into outcomes and metrics
  (``metric_rows``);
- sweep: exactly what ``loopbench sweep --param THRESHOLD=...`` runs
  (``sim.tuning.sweep.run_sweep``, in one process): one ``run_open``, the contract check, then
  outcomes at every value from the stored scores (``sim.scoring.thresholds.sweep``, the official
  scorer) and a metrics row per value.

Target: sweep time <= 1.5 x single-evaluation time. The script also checks that the
sweep took the one-pass path (one open-loop run) and that its row at the detector's own
value has the same outcome counts as the single evaluation, and exits non-zero if not.

Run: python bench/bench_sweep.py [--detectors exact,normalized,cline,no_progress] [--values 50] [--suite default]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scenarios.suites import load_suite  # noqa: E402
from sim.config.spec import DetectorSpec  # noqa: E402
from sim.execute.tasks import run_open  # noqa: E402
from sim.execute.rows import metric_rows  # noqa: E402
from sim.execute.runner import build_scenarios, generate_episodes  # noqa: E402
from sim.scoring.outcomes import DELTA, load_profiles  # noqa: E402
from sim.tuning.params import ParamGrid  # noqa: E402
from sim.tuning.sweep import run_sweep  # noqa: E402

COUNTS = ("tn", "fp", "early", "tp", "miss", "late")


def grid_values(default: float, n: int) -> list:
    """``n`` values around the default: 1..n for an integer threshold, else a spread to 3x."""
    if isinstance(default, int) and not isinstance(default, bool):
        return list(range(1, n + 1))
    return sorted({round(float(v), 6) for v in np.linspace(default / 10, default * 3, n)} | {float(default)})


def best_of(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="default")
    ap.add_argument("--detectors", default="exact,normalized,cline,no_progress")
    ap.add_argument("--values", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings")
    args = ap.parse_args(argv)
    suite = load_suite(args.suite)
    t0 = time.perf_counter()
    scenarios = build_scenarios(suite.families, suite.episodes, suite.seed, suite.family_params, suite.family_weights)
    episodes = generate_episodes(scenarios)
    print(f"suite {suite.name}: {len(episodes)} episodes, {sum(len(e.tool_nodes()) for e in episodes):,} calls "
          f"(generated in {time.perf_counter() - t0:.1f} s); {args.values} threshold values; best of {args.repeat}")
    _, profiles = load_profiles()
    print(f"{'detector':14s} {'param':26s} {'single s':>9s} {'sweep s':>8s} {'ratio':>6s}  target <= 1.5   check")
    ok = True
    for name in [d for d in args.detectors.split(",") if d]:
        spec = DetectorSpec(name, name)
        det = spec.build()
        param = det.threshold_param
        if param is None:
            print(f"{name:14s} (no threshold_param: not sweepable)")
            continue
        values = grid_values(getattr(det, param), args.values)

        def single():
            res = run_open(name, spec.build(), episodes)
            return metric_rows(name, episodes, res, DELTA, profiles)[0]

        def swept():
            return run_sweep(spec, [ParamGrid(param, values)], episodes, profiles, delta=DELTA, engine=1)

        t_single, rows = best_of(single, args.repeat)
        t_sweep, result = best_of(swept, args.repeat)
        one = next(r for r in rows if r["family"] == "all")
        default = next(r for r in result.rows if r["default"])
        good = result.mode == "stored-scores" and result.runs == 1 and all(default[k] == one[k] for k in COUNTS)
        ok &= good
        ratio = t_sweep / t_single
        print(f"{name:14s} {param:26s} {t_single:9.3f} {t_sweep:8.3f} {ratio:6.2f}  {'met' if ratio <= 1.5 else 'NOT met':7s}"
              f"       {'ok' if good else 'FAILED'} ({len(result.rows)} values, {result.runs} open-loop run, "
              f"default row {'=' if good else '!='} single evaluation)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
