"""A task: one detector over a suite's episodes, open loop (per-call scores) or closed loop
(the detector in the harness). Pool workers, Ray workers and the in-process runner run the
same functions, so every engine gives the same results."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from detectors.protocol import Detector, prefetches
from scenarios.base import Scenario
from scenarios.tree import Episode
from sim.play.harness import ClosedLoopStats, Tape, simulate
from sim.play.openloop import DetectorFailure, describe, score_episode
from sim.play.watchdog import CheckTimeout, Watchdog
from sim.scoring.outcomes import CallScore


@dataclass
class OpenResult:
    label: str
    scores: dict[str, list[CallScore]]
    errors: dict[str, str]
    seconds: float


def run_open(label: str, detector: Detector, episodes: Sequence[Episode], bar=None,
             watch: Watchdog | None = None) -> OpenResult:
    if prefetches(detector):
        # Detectors with a model encode every distinct text of the suite in one batch.
        detector.prefetch([n.call for ep in episodes for n in ep.tool_nodes()])
    scores: dict[str, list[CallScore]] = {}
    errors: dict[str, str] = {}
    t0 = time.perf_counter()
    for ep in episodes:
        try:
            scores[ep.id] = score_episode(detector, ep, watch)
        except DetectorFailure as exc:
            errors[ep.id] = str(exc)
        if bar:
            bar.update()
    return OpenResult(label, scores, errors, time.perf_counter() - t0)


def run_closed(label: str, detector: Detector, scenarios: Sequence[Scenario], bar=None,
               episodes: Sequence[Episode] = (), watch: Watchdog | None = None,
               tapes: Mapping[str, Tape] | None = None) -> dict[str, ClosedLoopStats]:
    """``tapes`` (scenario id -> the :class:`Tape` its generation recorded) spare the
    simulation of what the detector does not change; without them the suite is played in full."""
    if prefetches(detector) and episodes:
        # Most closed-loop calls are the open-loop ones; encode them in one batch up front.
        detector.prefetch([n.call for ep in episodes for n in ep.tool_nodes()])
    out = {}
    for sc in scenarios:
        try:
            out[sc.id] = simulate(sc, detector, watch=watch, tape=tapes.get(sc.id) if tapes else None).stats
        except (Exception, CheckTimeout) as exc:  # a detector that raises or overruns fails its episode
            if watch is not None:
                watch.end()
            st = ClosedLoopStats(ended="detector_error", success=False)
            st.detector_error = str(exc) if isinstance(exc, (DetectorFailure, CheckTimeout)) else describe(exc)
            out[sc.id] = st
        if bar:
            bar.update()
    return out


def percentile_ms(values: list[int], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(q * (len(values) - 1)))))
    return values[k] / 1000.0


def timing_row(label: str, mode: str, ns: list[int], seconds: float, counters: dict[str, int]) -> dict[str, Any]:
    """A ``timings.csv`` row: measured check times and the detector's cost counters."""
    lookups, hits = counters.get("cache_lookups", 0), counters.get("cache_hits", 0)
    return {
        "detector": label, "mode": mode, "checks": len(ns), "p50_us": percentile_ms(ns, 0.5), "p95_us": percentile_ms(ns, 0.95),
        "mean_us": statistics.fmean(ns) / 1000.0 if ns else None, "total_s": seconds,
        "model_calls": counters.get("model_calls", 0),
        "cache_hit_rate": (hits / lookups) if lookups else None,
    }
