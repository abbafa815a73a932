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
from sim.play.frameworks import BUILTIN, linear, play
from sim.play.harness import ClosedLoopStats, Tape, quiet_play, simulate
from sim.play.openloop import DetectorFailure, Scored, describe, score_episode
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
    _prefetch(detector, episodes)
    scores: dict[str, list[CallScore]] = {}
    errors: dict[str, str] = {}
    t0 = time.perf_counter()
    for ep in episodes:
        _open_episode(detector, ep, watch, scores, errors)
        if bar:
            bar.update()
    return OpenResult(label, scores, errors, time.perf_counter() - t0)


def run_closed(label: str, detector: Detector, scenarios: Sequence[Scenario], bar=None,
               episodes: Sequence[Episode] = (), watch: Watchdog | None = None,
               tapes: Mapping[str, Tape] | None = None, harness: str = BUILTIN) -> dict[str, ClosedLoopStats]:
    """``tapes`` (scenario id -> the :class:`Tape` its generation recorded) spare the
    simulation of what the detector does not change; without them the suite is played in full.
    ``harness``: a framework's name plays every scenario through its real agent loop
    (``sim.play.frameworks``; tapes are not used), leaving out the branching ones."""
    if harness != BUILTIN:
        return {sc.id: _framework_episode(harness, detector, sc, watch) for sc in scenarios if linear(sc)}
    if episodes:
        # Most closed-loop calls are the open-loop ones; encode them in one batch up front.
        _prefetch(detector, episodes)
    out = {}
    for sc in scenarios:
        out[sc.id] = _closed_episode(detector, sc, watch, tapes.get(sc.id) if tapes else None)
        if bar:
            bar.update()
    return out


def run_both(label: str, open_detector: Detector, closed_detector: Detector, episodes: Sequence[Episode],
             scenarios: Sequence[Scenario], watch: Watchdog | None = None,
             tapes: Mapping[str, Tape] | None = None) -> tuple[OpenResult, dict[str, ClosedLoopStats], float]:
    """A detector's open- and closed-loop tasks at once, episode by episode: the closed-loop
    play takes its detector's answers from the open-loop run of the same episode for as long
    as it follows that episode (``simulate(scored=)``), so each answer is computed once.
    Returns the open result, the closed stats and the closed-loop seconds; both are what
    :func:`run_open` and :func:`run_closed` give. Without tapes, or when the episodes are not
    the scenarios' own in the same order (nothing then to follow), it runs the two in turn."""
    if not tapes or [ep.id for ep in episodes] != [sc.id for sc in scenarios]:
        res = run_open(label, open_detector, episodes, watch=watch)
        t0 = time.perf_counter()
        return res, run_closed(label, closed_detector, scenarios, episodes=episodes, watch=watch, tapes=tapes), \
            time.perf_counter() - t0
    # One prefetch: the open-loop detector's brings the suite's vectors into this process's
    # shared embedder, where the closed-loop one finds them for the few checks it makes live.
    _prefetch(open_detector, episodes)
    scores: dict[str, list[CallScore]] = {}
    errors: dict[str, str] = {}
    closed: dict[str, ClosedLoopStats] = {}
    open_s = closed_s = 0.0
    for ep, sc in zip(episodes, scenarios):
        seen: dict[str, Scored] = {}
        t0 = time.perf_counter()
        _open_episode(open_detector, ep, watch, scores, errors, seen)
        t1 = time.perf_counter()
        closed[sc.id] = _closed_episode(closed_detector, sc, watch, tapes.get(sc.id),
                                        None if ep.id in errors else seen)
        open_s += t1 - t0
        closed_s += time.perf_counter() - t1
    return OpenResult(label, scores, errors, open_s), closed, closed_s


def _prefetch(detector: Detector, episodes: Sequence[Episode]) -> None:
    if prefetches(detector):
        # Detectors with a model encode every distinct text of the suite in one batch.
        detector.prefetch([n.call for ep in episodes for n in ep.tool_nodes()])


def _open_episode(detector: Detector, ep: Episode, watch: Watchdog | None, scores: dict[str, list[CallScore]],
                  errors: dict[str, str], seen: dict[str, Scored] | None = None) -> None:
    try:
        scores[ep.id] = score_episode(detector, ep, watch, seen)
    except DetectorFailure as exc:
        errors[ep.id] = str(exc)


def _closed_episode(detector: Detector, sc: Scenario, watch: Watchdog | None, tape: Tape | None,
                    seen: Mapping[str, Scored] | None = None) -> ClosedLoopStats:
    if seen is not None and tape is not None:
        quiet = quiet_play(sc, tape, seen)
        if quiet is not None:
            return quiet
    try:
        return simulate(sc, detector, watch=watch, tape=tape, scored=seen).stats
    except (Exception, CheckTimeout) as exc:  # a detector that raises or overruns fails its episode
        if watch is not None:
            watch.end()
        st = ClosedLoopStats(ended="detector_error", success=False)
        st.detector_error = str(exc) if isinstance(exc, (DetectorFailure, CheckTimeout)) else describe(exc)
        return st


def _framework_episode(harness: str, detector: Detector, sc: Scenario, watch: Watchdog | None) -> ClosedLoopStats:
    try:
        return play(harness, sc, detector, watch)
    except (Exception, CheckTimeout) as exc:  # the detector (or the framework around it) failed the episode
        if watch is not None:
            watch.end()
        return ClosedLoopStats(ended="detector_error", success=False,
                               detector_error=str(exc) if isinstance(exc, CheckTimeout) else describe(exc))


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
