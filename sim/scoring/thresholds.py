"""Threshold sweeps in one pass from stored scores, and the three labelled operating points.

A detector that names a ``threshold_param`` promises: it alarms on a call iff
``score >= threshold_for(tool, value)``, and its score does not depend on that value. So
the alarms at any other value follow from the per-call scores already in ``calls.csv``,
without re-running the detector; :func:`sweep` scores them with the one official scorer
(:class:`sim.scoring.outcomes.ScoringUnits`). :func:`check_contract` verifies the promise on the
stored verdicts at the run's own value, and a detector that breaks it is shown at its
default only.

Operating points (SPEC §5), always labelled:

- ``default``: the value the run used (the detector's shipped value unless overridden);
- ``calibrated@1%`` / ``calibrated@5%``: the value with the lowest miss rate among those
  whose false-alarm rate on clean episodes is at most the target (ties: higher standard
  score, then nearest the default) — matched on the suite's clean episodes;
- ``calibrated_heldout``: leave-one-family-out — for each family, the value with the best
  standard score on all *other* families is applied to it; the held-out outcomes of every
  family are pooled;
- ``oracle``: the best standard score on the scored episodes themselves — an upper bound,
  never the headline.

:func:`pick_calibrated`, :func:`pick_best` and :func:`heldout_totals` work on totals with
any leading axes, so the same selection is redone inside every bootstrap round.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from detectors.protocol import Detector

from sim.scoring.outcomes import DELTA, Outcome, ScoringUnits, composite, summarize, units_by_id
from scenarios.tree import Episode

#: Verdicts that end a run when the guard runs as configured (a nudge or a refused call lets it go on).
HALTING_VERDICTS = ("stop", "escalate")
#: Most thresholds a sweep tries; a float score with many distinct values is cut at quantiles.
MAX_VALUES = 40
FAR_TARGETS = (0.01, 0.05)


@dataclass
class CallScores:
    """One detector's stored per-call scores, grouped by episode (node ids, scores, tools)."""

    by_episode: dict[str, tuple[list[str], np.ndarray, list[str]]] = field(default_factory=dict)
    verdict_alarm: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per episode, which calls the detector's own verdict ends the run with (``stop`` /
    #: ``escalate``): the "as configured" halts of the deployment view.
    verdict_halt: dict[str, np.ndarray] = field(default_factory=dict)
    #: False when which alarms halt is unknown (:meth:`at_threshold` over a detector whose stored
    #: alarms halt only sometimes): ``verdict_halt`` is then empty.
    halt_known: bool = True

    @classmethod
    def from_rows(cls, rows) -> "CallScores":
        """From calls.csv rows of one detector (a DataFrame or dicts with episode, node, score, tool[, verdict])."""
        cs = cls()
        if hasattr(rows, "to_dict"):
            cols = {c: rows[c].tolist() for c in ("episode", "node", "score", "tool") if c in rows}
            verdicts = rows["verdict"].tolist() if "verdict" in rows else None
        else:
            rows = list(rows)
            cols = {c: [r[c] for r in rows] for c in ("episode", "node", "score", "tool")}
            verdicts = [r["verdict"] for r in rows] if rows and "verdict" in rows[0] else None
        grouped: dict[str, list[int]] = {}
        for i, e in enumerate(cols["episode"]):
            grouped.setdefault(e, []).append(i)
        for e, idx in grouped.items():
            cs.by_episode[e] = ([cols["node"][i] for i in idx], np.array([float(cols["score"][i]) for i in idx]),
                                [str(cols["tool"][i]) for i in idx])
            if verdicts is not None:
                cs.verdict_alarm[e] = np.array([verdicts[i] != "allow" for i in idx])
                cs.verdict_halt[e] = np.array([verdicts[i] in HALTING_VERDICTS for i in idx])
        return cs

    def scores(self) -> np.ndarray:
        return np.concatenate([s for _, s, _ in self.by_episode.values()]) if self.by_episode else np.zeros(0)

    def at_threshold(self, detector: Detector, value: float) -> "CallScores":
        """These calls as ``detector`` would have judged them at threshold ``value`` (the threshold
        contract: alarm iff ``score >= threshold_for(tool, value)``), its verdicts replaced by
        those alarms. Which of them halt as configured follows the stored verdicts: all when every
        stored alarm halted, none when none did; otherwise it cannot be told from the scores
        and ``verdict_halt`` is left empty (``halt_known`` False)."""
        thresholds = _Thresholds(detector, [value])
        alarmed = [h[a] for e, a in self.verdict_alarm.items() if (h := self.verdict_halt.get(e)) is not None]
        halting = np.concatenate(alarmed) if alarmed else np.zeros(0, dtype=bool)
        halts = bool(halting.all()) if len(halting) else False
        out = CallScores(self.by_episode, halt_known=not (len(halting) and halting.any() and not halting.all()))
        for e, (_, scores, tools) in self.by_episode.items():
            out.verdict_alarm[e] = alarm = thresholds.alarms(scores, tools)[0]
            if out.halt_known:
                out.verdict_halt[e] = alarm if halts else np.zeros(len(alarm), dtype=bool)
        return out


class _Thresholds:
    """``threshold_for(tool, value)`` for every tool and value, asked once per pair, as a
    (values x tools) matrix; an episode's calls index it by tool column."""

    def __init__(self, detector: Detector, values: Sequence[float]) -> None:
        self.detector, self.values = detector, list(values)
        self.columns: dict[str, int] = {}
        self.matrix = np.empty((len(self.values), 0))

    def alarms(self, scores: np.ndarray, tools: list[str]) -> np.ndarray:
        """(values x calls): whether each call alarms at each value."""
        new = [t for t in dict.fromkeys(tools) if t not in self.columns]
        if new:
            for t in new:
                self.columns[t] = len(self.columns)
            added = np.array([[float(self.detector.threshold_for(t, v)) for t in new] for v in self.values])
            self.matrix = np.hstack([self.matrix, added.reshape(len(self.values), len(new))])
        cols = np.fromiter((self.columns[t] for t in tools), dtype=np.intp, count=len(tools))
        return scores[None, :] >= self.matrix[:, cols]


def check_contract(detector: Detector, calls: CallScores, value: float) -> tuple[int, int]:
    """(calls whose stored verdict disagrees with ``score >= threshold_for(tool, value)``, calls)."""
    thresholds = _Thresholds(detector, [value])
    bad = total = 0
    for e, (nodes, scores, tools) in calls.by_episode.items():
        if e not in calls.verdict_alarm:
            continue
        bad += int(np.sum(thresholds.alarms(scores, tools)[0] != calls.verdict_alarm[e]))
        total += len(nodes)
    return bad, total


def candidate_values(detector: Detector, calls: CallScores, default: float, max_values: int = MAX_VALUES) -> list[float]:
    """The thresholds worth trying: every distinct alarm set the stored scores allow, plus the default.

    An integer parameter gets every integer from 1 to one above the largest score (0 or
    less often means "disabled"); a float parameter gets the distinct scores (cut at
    quantiles when there are more than ``max_values``) and a value just above the largest,
    where the detector never fires.
    """
    s = calls.scores()
    s = s[np.isfinite(s)]
    if isinstance(default, (int, np.integer)) and not isinstance(default, bool):
        top = int(math.floor(s.max())) + 1 if len(s) else int(default)
        vals = list(range(1, max(top, int(default)) + 1))
        if len(vals) > max_values:
            keep = np.unique(np.linspace(0, len(vals) - 1, max_values).round().astype(int))
            vals = [vals[i] for i in keep]
        return sorted(set(vals) | {int(default)})
    uniq = np.unique(s)
    if len(uniq) > max_values - 2:
        uniq = np.unique(np.quantile(uniq, np.linspace(0, 1, max_values - 2)))
    vals = [float(v) for v in uniq]
    if len(s):
        vals.append(float(np.nextafter(s.max(), np.inf)))
    return sorted(set(vals) | {float(default)})


def sweep(episodes: Sequence[Episode] | Mapping[str, ScoringUnits], calls, detector: Detector,
          values: Sequence[float], delta: int = DELTA, errors: Mapping[str, str] | None = None) -> list[list[Outcome]]:
    """Outcomes of every episode at every threshold value, from stored per-call scores, in one pass.

    ``episodes`` are the scored episodes (or their precomputed :class:`ScoringUnits` keyed by
    id), ``calls`` the calls.csv rows of one detector (or a :class:`CallScores`),
    ``detector`` an instance of it (only ``threshold_for`` is called), ``errors`` the
    episodes it failed on (worst outcome at every value). Returns one outcome list per value.
    """
    units = episodes if isinstance(episodes, Mapping) else units_by_id(episodes)
    cs = calls if isinstance(calls, CallScores) else CallScores.from_rows(calls)
    errors = errors or {}
    thresholds = _Thresholds(detector, values)
    out: list[list[Outcome]] = [[] for _ in values]
    for eid, u in units.items():
        if eid in errors or eid not in cs.by_episode:
            err = errors.get(eid, "no stored scores for this episode")
            failed = u.outcomes({}, delta, error=err)
            for lst in out:
                lst.extend(failed)
            continue
        nodes, scores, tools = cs.by_episode[eid]
        seen: dict[bytes, list[Outcome]] = {}  # values that give the same alarms give the same outcomes
        for lst, alarm in zip(out, thresholds.alarms(scores, tools)):
            key = alarm.tobytes()
            if key not in seen:
                seen[key] = u.outcomes(dict(zip(nodes, alarm.tolist())), delta)
            lst.extend(seen[key])
    return out


def sweep_metrics(values: Sequence[float], outcomes: Sequence[Sequence[Outcome]], profiles: Mapping[str, Mapping[str, float]],
                  delta: int = DELTA) -> list[dict[str, Any]]:
    """Per value: the scorer's summary plus the composite per profile."""
    rows = []
    for v, outs in zip(values, outcomes):
        row = {"value": v, **summarize(outs, delta)}
        for name, w in profiles.items():
            row[f"score_{name}"] = composite(outs, w, delta)
        rows.append(row)
    return rows


# -- selection, vectorised over any leading axes (point estimate or bootstrap rounds) -------------
def _nearest_default_penalty(n: int, default_index: int) -> np.ndarray:
    return 1e-9 * np.abs(np.arange(n) - default_index)


def pick_best(score: np.ndarray, default_index: int = 0) -> np.ndarray:
    """Index of the highest score along the last axis (ties: nearest the default); NaN never wins."""
    key = np.where(np.isnan(score), -np.inf, score) - _nearest_default_penalty(score.shape[-1], default_index)
    return np.argmax(key, axis=-1)


def pick_calibrated(far: np.ndarray, miss: np.ndarray, score: np.ndarray, target: float,
                    default_index: int = 0) -> np.ndarray:
    """Index of the lowest miss rate with ``far <= target`` along the last axis.

    Ties go to the higher score, then to the value nearest the default. When no value meets
    the target, the one with the lowest false-alarm rate.
    """
    n = far.shape[-1]
    feasible = np.nan_to_num(far, nan=np.inf) <= target + 1e-12
    m = np.where(feasible, np.nan_to_num(miss, nan=1.0), np.inf)
    best_miss = m.min(axis=-1, keepdims=True)
    cand = feasible & (m <= best_miss + 1e-12)
    key = np.where(cand, np.nan_to_num(score, nan=-1e9), -np.inf) - _nearest_default_penalty(n, default_index)
    pick = np.argmax(key, axis=-1)
    fallback = np.argmin(np.nan_to_num(far, nan=np.inf) + _nearest_default_penalty(n, default_index), axis=-1)
    return np.where(feasible.any(axis=-1), pick, fallback)


def take(totals: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``totals[..., index, :]`` per leading position: totals ``(..., V, k)``, index ``(...)``."""
    return np.take_along_axis(totals, index[..., None, None], axis=-2)[..., 0, :]


def heldout_totals(per_family: np.ndarray, score_fn, default_index: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-family-out: per family, pick on the others, apply to it; pool the held-out totals.

    ``per_family`` is ``(..., F, V, k)``; ``score_fn`` maps totals ``(..., V, k)`` to scores
    ``(..., V)``. Returns (pooled totals ``(..., k)``, picked index per family ``(..., F)``).
    """
    total = per_family.sum(axis=-3, keepdims=True)
    calib = total - per_family  # (..., F, V, k)
    pick = pick_best(score_fn(calib), default_index)  # (..., F)
    chosen = take(per_family, pick)  # (..., F, k)
    return chosen.sum(axis=-2), pick


def family_order(units: Iterable[ScoringUnits]) -> list[str]:
    return sorted({u.family for u in units})
