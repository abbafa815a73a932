"""Cost of sweeping a detector's threshold over 50 values, against one evaluation.

A detector with a ``threshold_param`` alarms on a call iff
``score >= threshold_for(tool, value)`` and its score does not depend on the value, so a
sweep needs the detector run once (per-call scores) and then only re-scores outcomes.

- single evaluation: what the runner does for one detector in open loop — score every
  episode of the suite (``run_open``) and turn the verdicts into outcomes and metrics
  (``metric_rows``);
- sweep: the same ``run_open`` once, then outcomes and summary counts at 50 threshold
  values from the stored scores, vectorised with numpy over values × scoring units.

Target: sweep time <= 1.5 x single-evaluation time. The script also checks the
vectorised outcomes against the official scorer (``sim.scoring.episode_outcomes``) at
the detector's own value and at two others, and exits non-zero if they differ.

The one-pass sweep engine of the reports work (``sim.thresholds.sweep``) was not on main
when this was written; this bench uses its own small vectorised re-scorer and should
time ``sim.thresholds.sweep`` once that lands.

Run: python bench/bench_sweep.py [--detectors exact,normalized,cline] [--values 50] [--suite default]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scenarios.suites import load_suite  # noqa: E402
from sim.runner import DetectorSpec, build_scenarios, generate_episodes, metric_rows, run_open  # noqa: E402
from sim.scoring import DELTA, episode_outcomes, load_profiles, summarize  # noqa: E402
from sim.tree import ToolNode  # noqa: E402


class Units:
    """The scoring units of a suite (clean episodes and looping paths) as padded index arrays.

    Each unit is a row of global call indices in path order (clean episodes: their judged
    calls); padding points at a sentinel column that never alarms.
    """

    def __init__(self, episodes):
        self.node_index: dict[tuple[str, str], int] = {}
        self.tools: list[str] = []
        rows, onsets, clean = [], [], []
        self.keys = []
        for ep in episodes:
            if not ep.labelled:
                continue
            base = len(self.tools)
            for n in ep.tool_nodes():
                self.node_index[(ep.id, n.id)] = len(self.tools)
                self.tools.append(n.call.tool)
            scored_from = int(ep.meta.get("scored_from", 0) or 0)
            index = ep.call_index()
            looping = []
            for path in ep.paths():
                calls = [n for n in path if isinstance(n, ToolNode)]
                onset = next((i for i, n in enumerate(calls)
                              if index[n.id] >= scored_from and n.label is not None and n.label.loop), None)
                if onset is not None:
                    # Calls before scored_from are history: never judged, so they map to the sentinel.
                    looping.append(([self.node_index[(ep.id, n.id)] if index[n.id] >= scored_from else -1
                                     for n in calls], onset, path[-1].id))
            if looping:
                for idx, onset, leaf in looping:
                    rows.append(idx)
                    onsets.append(onset)
                    clean.append(False)
                    self.keys.append((ep.id, leaf))
            else:
                rows.append([base + i for i in range(len(ep.tool_nodes())) if i >= scored_from])
                onsets.append(-1)
                clean.append(True)
                self.keys.append((ep.id, "episode"))
        self.n_calls = len(self.tools)
        width = max((len(r) for r in rows), default=1)
        pad = np.full((len(rows), width), self.n_calls, dtype=np.int64)  # the sentinel column
        for i, r in enumerate(rows):
            r = [self.n_calls if x < 0 else x for x in r]
            pad[i, : len(r)] = r
        self.pad = pad
        self.onset = np.array(onsets, dtype=np.int64)
        self.clean = np.array(clean, dtype=bool)
        self.tool_names = sorted(set(self.tools))
        tid = {t: i for i, t in enumerate(self.tool_names)}
        self.tool_id = np.array([tid[t] for t in self.tools], dtype=np.int64)


def sweep(units: Units, scores: np.ndarray, detector, values, delta: int = DELTA) -> dict[str, np.ndarray]:
    """Outcome counts at every value: arrays over values of tn, fp, early, tp, miss, late, mean delay."""
    values = list(values)
    # Thresholds per (value, tool), then per call: threshold_for is called values x tools times.
    per_tool = np.array([[detector.threshold_for(t, v) for t in units.tool_names] for v in values], dtype=float)
    thr = per_tool[:, units.tool_id]
    alarms = np.zeros((len(values), units.n_calls + 1), dtype=bool)
    alarms[:, :-1] = scores[None, :] >= thr
    hits = alarms[:, units.pad]  # values x units x width
    fired = hits.any(axis=2)
    first = hits.argmax(axis=2)
    clean, onset = units.clean[None, :], units.onset[None, :]
    early = ~clean & fired & (first < onset)
    tp = ~clean & fired & (first >= onset) & (first <= onset + delta)
    late = ~clean & fired & (first > onset + delta)
    delay = np.where(tp, first - onset, 0)
    n_tp = tp.sum(axis=1)
    return {
        "tn": (clean & ~fired).sum(axis=1), "fp": (clean & fired).sum(axis=1), "early": early.sum(axis=1),
        "tp": n_tp, "miss": (~clean & ~fired).sum(axis=1) + late.sum(axis=1), "late": late.sum(axis=1),
        "mean_delay": np.where(n_tp > 0, delay.sum(axis=1) / np.maximum(n_tp, 1), np.nan),
    }


def official(episodes, units: Units, scores: np.ndarray, detector, value, delta: int = DELTA) -> Counter:
    """The same counts from the official scorer, with alarms from the score contract."""
    c: Counter = Counter()
    for ep in episodes:
        if not ep.labelled:
            continue
        alarms = {n.id: bool(scores[units.node_index[(ep.id, n.id)]] >= detector.threshold_for(n.call.tool, value))
                  for n in ep.tool_nodes()}
        for o in episode_outcomes(ep, alarms, delta):
            c[o.outcome] += 1
            c["late"] += o.late
    return c


def candidate_values(scores: np.ndarray, default: float, n: int) -> list[float]:
    lo, hi = float(scores.min()), float(scores.max())
    vals = sorted(set(np.linspace(lo, hi + (hi - lo) / max(1, n - 1), n - 1).tolist()) | {float(default)})
    return vals[:n]


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="default")
    ap.add_argument("--detectors", default="exact,normalized,cline,no_progress")
    ap.add_argument("--values", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3, help="best of N timings")
    args = ap.parse_args(argv)
    suite = load_suite(args.suite)
    t0 = time.perf_counter()
    scenarios = build_scenarios(suite.families, suite.episodes, suite.seed, suite.family_params)
    episodes = generate_episodes(scenarios)
    print(f"suite {suite.name}: {len(episodes)} episodes, {sum(len(e.tool_nodes()) for e in episodes):,} calls "
          f"(generated in {time.perf_counter() - t0:.1f} s); {args.values} threshold values; best of {args.repeat}")
    _, profiles = load_profiles()
    print(f"{'detector':14s} {'single s':>9s} {'run_open s':>10s} {'sweep-only s':>12s} {'sweep s':>8s} {'ratio':>6s}  target <= 1.5   check")
    ok = True
    for name in [d for d in args.detectors.split(",") if d]:
        spec = DetectorSpec(name, name)
        det = spec.build()
        param = det.threshold_param
        if param is None:
            print(f"{name:14s} (no threshold_param: not sweepable)")
            continue
        default = float(getattr(det, param))
        res = run_open(name, spec.build(), episodes)

        def single():
            r = run_open(name, spec.build(), episodes)
            metric_rows(name, episodes, r, DELTA, profiles)

        def open_only():
            run_open(name, spec.build(), episodes)

        state = {}

        def sweep_only():
            units = Units(episodes)  # structure of the suite, rebuilt inside the timing
            scores = np.zeros(units.n_calls)
            for eid, sc in res.scores.items():
                for s in sc:
                    key = (eid, s.node_id)
                    if key in units.node_index:
                        scores[units.node_index[key]] = s.score
            values = candidate_values(scores, default, args.values)
            state.update(units=units, scores=scores, values=values, out=sweep(units, scores, det, values))

        t_single = best_of(single, args.repeat)
        t_open = best_of(open_only, args.repeat)
        t_sweep_only = best_of(sweep_only, args.repeat)
        t_sweep = t_open + t_sweep_only
        # Correctness: the vectorised counts equal the official scorer's at three values.
        units, scores, values, out = state["units"], state["scores"], state["values"], state["out"]
        checks = []
        for v in (default, values[len(values) // 3], values[2 * len(values) // 3]):
            i = values.index(v)
            ref = official(episodes, units, scores, det, v)
            got = {k: int(out[k][i]) for k in ("tn", "fp", "early", "tp", "miss", "late")}
            checks.append(all(got[k] == ref.get(k, 0) for k in got))
        # And the contract at the run's own value: alarms from scores == alarms from verdicts.
        verdict_alarms = contract = 0
        for eid, sc in res.scores.items():
            for s in sc:
                if (eid, s.node_id) not in units.node_index:
                    continue
                alarm = s.verdict.value != "allow"
                verdict_alarms += alarm
                tool = units.tools[units.node_index[(eid, s.node_id)]]
                contract += alarm != (s.score >= det.threshold_for(tool, default))
        good = all(checks)
        ok &= good
        ratio = t_sweep / t_single
        print(f"{name:14s} {t_single:9.3f} {t_open:10.3f} {t_sweep_only:12.3f} {t_sweep:8.3f} {ratio:6.2f}  "
              f"{'met' if ratio <= 1.5 else 'NOT met':7s}       outcomes {'match' if good else 'DIFFER'} "
              f"({len(values)} values, {verdict_alarms} alarms, contract breaks {contract})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
