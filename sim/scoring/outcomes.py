"""The one official scorer: per-call alarms -> episode outcomes -> metrics (SPEC §5).

Outcomes are judged per looping path (root-to-leaf path with a loop-labelled call) or
per clean episode, from the first alarm ``a`` in halt mode:

=========  =====================================  ==========
episode    condition                              outcome
=========  =====================================  ==========
clean      no alarm                               TN
clean      any alarm                              FP
looping    a < onset                              EARLY
looping    onset <= a <= onset + DELTA            TP, delay a - onset
looping    a > onset + DELTA, or no alarm         MISS (``late`` when it fired after the window)
=========  =====================================  ==========

Positions are counted in tool calls along the path. Calls before an episode's
``scored_from`` are history (for example a loop a previous guard already handled):
they feed the detector but neither their alarms nor their labels are judged.
"""
from __future__ import annotations

import math
import statistics
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Iterable, Mapping, Sequence

from detectors.protocol import Verdict
from scenarios.outcome import UNKNOWN, run_outcome
from scenarios.severity import BLIP, RUNAWAY, SEVERITY_KEY, Severity, severity, severity_meta
from scenarios.tree import Episode, ToolNode

#: The detection window: an alarm up to DELTA calls after the onset still counts as caught.
@dataclass(slots=True)
class CallScore:
    """One detector's view of one proposed call."""

    node_id: str
    call_index: int
    depth: int  # 0-based position of the call among the tool calls of its path
    score: float
    verdict: Verdict
    ns: int  # measured time of check + record, in nanoseconds
    error: str | None = None

    def __reduce__(self):
        # A detector task sends tens of thousands of these from its pool worker; as plain
        # argument tuples they serialise and load about twice as fast as through the
        # default slot-state protocol, and the parent loads every task's result serially.
        return (CallScore, (self.node_id, self.call_index, self.depth, self.score, self.verdict, self.ns, self.error))



#: A verdict's text as the result files write it (``Verdict.value`` goes through the enum machinery).
VERDICT_TEXT = {v: v.value for v in Verdict}

DELTA = 5

OUTCOMES = ("tn", "fp", "early", "tp", "miss")


@dataclass(frozen=True, slots=True)
class Outcome:
    episode: str
    family: str
    unit: str  # "episode" for a clean episode, else the leaf node id of the looping path
    outcome: str  # tn | fp | early | tp | miss | unlabelled
    onset: int | None  # path position of the first redundant call
    first_alarm: int | None  # path position (looping) or call index (clean) of the first alarm
    delay: int | None
    late: bool = False
    error: str | None = None
    # How the episode's run ended (SPEC §11): success | failure | unknown.
    run_outcome: str = UNKNOWN
    # The looping path's severity (SPEC §11); None on a clean episode.
    persistence: int | None = None
    to_end: bool | None = None
    severity: str | None = None


def load_profiles() -> tuple[str, dict[str, dict[str, float]]]:
    data = tomllib.loads(resources.files("sim.scoring").joinpath("profiles/profiles.toml").read_text())
    return str(data["version"]), {k: {w: float(x) for w, x in v.items()} for k, v in data["profiles"].items()}


@dataclass(frozen=True, slots=True)
class ScoringUnits:
    """What the scorer judges in one episode, worked out once from its structure.

    ``looping`` holds one ``(leaf id, judged call ids along the path, onset)`` per looping
    path; ``clean`` the judged call ids of a clean (or unlabelled) episode. Calls before
    ``scored_from`` are left out of both. A threshold sweep or a Δ sensitivity view
    re-scores the same episode many times with different alarms; building the units once
    keeps that fast while every outcome still comes from :meth:`outcomes`.
    """

    episode: str
    family: str
    labelled: bool
    clean: tuple[tuple[str, int], ...]  # (node id, call index), judged calls of a clean episode
    looping: tuple[tuple[str, tuple[str | None, ...], int], ...]  # (leaf, path call ids or None, onset)
    severities: tuple[Severity, ...] = ()  # one per looping path, in ``looping``'s order
    run_outcome: str = UNKNOWN

    def outcomes(self, alarms: Mapping[str, bool], delta: int = DELTA, error: str | None = None) -> list[Outcome]:
        """Outcomes given which call nodes alarmed (node id -> alarm); see :func:`episode_outcomes`."""
        return self.outcomes_at(self.first_alarms(alarms), delta, error)

    def first_alarms(self, alarms: Mapping[str, bool]) -> tuple[int | None, ...]:
        """Where the first alarm falls: the call index in a clean (or unlabelled) episode, else
        the path position on each looping path; ``None`` where nothing alarmed. It does not
        depend on the window, so a view over several windows works it out once."""
        if not self.labelled or not self.looping:
            return (min((i for n, i in self.clean if alarms.get(n, False)), default=None),)
        # ``None`` marks a history call (before scored_from): it counts for positions only.
        return tuple(next((i for i, n in enumerate(calls) if n is not None and alarms.get(n, False)), None)
                     for _, calls, _ in self.looping)

    def outcomes_at(self, first: tuple[int | None, ...], delta: int = DELTA, error: str | None = None) -> list[Outcome]:
        """Outcomes from :meth:`first_alarms` at window ``delta``."""
        ep, fam, run = self.episode, self.family, self.run_outcome
        if not self.labelled or not self.looping:
            if self.labelled and error is not None:
                return [Outcome(ep, fam, "episode", "fp", None, None, None, error=error, run_outcome=run)]
            kind = "unlabelled" if not self.labelled else ("tn" if first[0] is None else "fp")
            return [Outcome(ep, fam, "episode", kind, None, first[0], None, error=error if not self.labelled else None,
                            run_outcome=run)]
        out = []
        for (leaf, _, onset), a, sev in zip(self.looping, first, self.severities):
            more = {"run_outcome": run, **severity_meta(sev)}
            if error is not None:
                out.append(Outcome(ep, fam, leaf, "miss", onset, None, None, error=error, **more))
            elif a is None:
                out.append(Outcome(ep, fam, leaf, "miss", onset, None, None, **more))
            elif a < onset:
                out.append(Outcome(ep, fam, leaf, "early", onset, a, None, **more))
            elif a <= onset + delta:
                out.append(Outcome(ep, fam, leaf, "tp", onset, a, a - onset, **more))
            else:
                out.append(Outcome(ep, fam, leaf, "miss", onset, a, None, late=True, **more))
        return out


def scoring_units(episode: Episode) -> ScoringUnits:
    """The looping paths (or the clean episode) of ``episode`` as the scorer judges them."""
    scored_from = int(episode.meta.get("scored_from", 0) or 0)
    index = episode.call_index()
    judged = tuple((n.id, index[n.id]) for n in episode.tool_nodes() if index[n.id] >= scored_from)
    looping, severities = [], []
    if episode.labelled:
        recorded = recorded_severity(episode)
        for path in episode.paths():
            calls = [n for n in path if isinstance(n, ToolNode)]
            onset = next((i for i, n in enumerate(calls) if index[n.id] >= scored_from and n.label is not None and n.label.loop), None)
            if onset is not None:
                ids = tuple(n.id if index[n.id] >= scored_from else None for n in calls)
                looping.append((path[-1].id, ids, onset))
                severities.append(recorded or severity([n.label is not None and n.label.loop for n in calls], onset))
    return ScoringUnits(episode.id, episode.family, episode.labelled, judged, tuple(looping), tuple(severities),
                        run_outcome(episode.meta))


def recorded_severity(episode: Episode) -> Severity | None:
    """The severity an episode's meta records for its loop (``meta["severity"]``: the real
    suite's labeller-proposed persistence, where the hand labels mark every call from the
    onset on), or ``None``: then it follows from the per-call labels of each path.
    Only a linear episode has one loop for it to describe."""
    rec = episode.meta.get(SEVERITY_KEY)
    if not isinstance(rec, dict) or not episode.is_linear():
        return None
    persistence, to_end = rec.get("persistence"), rec.get("to_end")
    if isinstance(persistence, int) and not isinstance(persistence, bool) and persistence >= 1 and isinstance(to_end, bool):
        return Severity(persistence, to_end)
    return None


def units_by_id(episodes: Iterable[Episode]) -> dict[str, ScoringUnits]:
    """Each episode's :func:`scoring_units`, keyed by its id, in the episodes' order."""
    return {ep.id: scoring_units(ep) for ep in episodes}


def episode_outcomes(episode: Episode, alarms: Mapping[str, bool], delta: int = DELTA,
                     error: str | None = None) -> list[Outcome]:
    """Outcomes of one episode given which call nodes alarmed (node id -> alarm).

    A detector that failed on the episode (``error``) gets the worst outcome: FP on a
    clean episode, MISS on every looping path.
    """
    return scoring_units(episode).outcomes(alarms, delta, error)


def alarms_from(scores: Sequence[CallScore]) -> dict[str, bool]:
    return {s.node_id: s.verdict.value != "allow" for s in scores}


def nab_credit(delay: int, delta: int = DELTA) -> float:
    """``s(d/Δ - 1) / s(-1)`` with ``s(y) = 2/(1 + e^(5y)) - 1``: 1.0 at d = 0, 0 at d = Δ.

    With Δ = 0 only a catch at the onset counts, and it earns the full credit of d = 0.
    """
    if delta <= 0:
        return 1.0 if delay <= 0 else 0.0
    s = lambda y: 2.0 / (1.0 + math.exp(5.0 * y)) - 1.0  # noqa: E731
    return s(delay / delta - 1.0) / s(-1.0)


def composite(outcomes: Iterable[Outcome], weights: Mapping[str, float], delta: int = DELTA) -> float:
    """The NAB-shaped per-episode composite: 0 for a detector that never fires, 100 for a perfect one."""
    credit = miss = early = looping = fp = clean = 0.0
    for o in outcomes:
        if o.outcome in ("tn", "fp"):
            clean += 1
            fp += o.outcome == "fp"
        elif o.outcome == "tp":
            credit += nab_credit(o.delay or 0, delta)
            looping += 1
        elif o.outcome == "miss":
            miss += 1
            looping += 1
        elif o.outcome == "early":
            early += 1
            looping += 1
    return float(composite_from_totals(credit, miss, early, looping, fp, clean, weights))


def composite_from_totals(credit, miss, early, looping, fp, clean, weights: Mapping[str, float]):
    """The composite from summed outcome counts; scalars or numpy arrays (a bootstrap's rounds).

    ``credit`` is the summed ``nab_credit`` of the caught loops, ``looping`` the number of
    looping paths (tp + miss + early), ``clean`` the number of clean episodes.
    ``U = (A_TP·credit − A_FN·miss − A_FP·early) / looping − A_FP · fp / clean``; with no
    looping path only the false-alarm term remains, scaled like the full score.
    """
    import numpy as np

    a_tp, a_fn, a_fp = weights["A_TP"], weights["A_FN"], weights["A_FP"]
    credit, miss, early, looping, fp, clean = (np.asarray(x, dtype=float) for x in (credit, miss, early, looping, fp, clean))
    far = np.divide(fp, clean, out=np.zeros(np.broadcast(fp, clean).shape), where=clean > 0)
    credits = a_tp * credit - a_fn * miss - a_fp * early
    mean = np.divide(credits, looping, out=np.zeros(np.broadcast(credits, looping).shape), where=looping > 0)
    u = np.where(looping > 0, mean, a_tp) - a_fp * far
    out = 100.0 * (u + a_fn) / (a_tp + a_fn)
    return out if out.ndim else float(out)


@dataclass
class Counts:
    tn: int = 0
    fp: int = 0
    early: int = 0
    tp: int = 0
    miss: int = 0
    late: int = 0
    errors: int = 0


def summarize(outcomes: Sequence[Outcome], delta: int = DELTA) -> dict[str, float | int | None]:
    """The deterministic metrics of one group of outcomes (one detector, one family or all)."""
    c = Counts()
    delays = []
    by_severity = {RUNAWAY: [0, 0], BLIP: [0, 0]}  # severity -> [caught, looping paths]
    for o in outcomes:
        if o.outcome in OUTCOMES:
            setattr(c, o.outcome, getattr(c, o.outcome) + 1)
        if o.severity in by_severity and o.outcome in ("tp", "miss", "early"):
            by_severity[o.severity][0] += o.outcome == "tp"
            by_severity[o.severity][1] += 1
        c.late += o.late
        c.errors += o.error is not None
        if o.outcome == "tp" and o.delay is not None:
            delays.append(o.delay)
    clean = c.tn + c.fp
    looping = c.early + c.tp + c.miss
    alarms = c.tp + c.fp + c.early
    recall = c.tp / looping if looping else None
    precision = c.tp / alarms if alarms else None
    f1 = (2 * precision * recall / (precision + recall)) if precision and recall else (0.0 if looping else None)
    return {
        "episodes": clean + looping,
        "tn": c.tn,
        "fp": c.fp,
        "early": c.early,
        "tp": c.tp,
        "miss": c.miss,
        "late": c.late,
        "errors": c.errors,
        "false_alarm_rate": c.fp / clean if clean else None,
        "miss_rate": c.miss / looping if looping else None,
        "early_rate": c.early / looping if looping else None,
        "recall": recall,
        "precision": precision,
        "f1": f1,
        "median_delay": statistics.median(delays) if delays else None,
        "mean_delay": statistics.fmean(delays) if delays else None,
        # Recall split by how long the loop lasts (SPEC §11): the loops a halt must catch, and the blips.
        "recall_runaway": by_severity[RUNAWAY][0] / by_severity[RUNAWAY][1] if by_severity[RUNAWAY][1] else None,
        "recall_blip": by_severity[BLIP][0] / by_severity[BLIP][1] if by_severity[BLIP][1] else None,
    }


def advisory_rate(episodes: Sequence[Episode], scores: Mapping[str, Sequence[CallScore]]) -> tuple[int, int]:
    """Advisory mode (no halt): (alarms on non-loop calls, non-loop calls) over labelled episodes."""
    alarms = calls = 0
    for ep in episodes:
        if not ep.labelled or ep.id not in scores:
            continue
        scored_from = int(ep.meta.get("scored_from", 0) or 0)
        labels = {n.id: n.label for n in ep.tool_nodes()}
        for s in scores[ep.id]:
            lab = labels.get(s.node_id)
            if s.call_index < scored_from or lab is None or lab.loop:
                continue
            calls += 1
            alarms += s.verdict.value != "allow"
    return alarms, calls
