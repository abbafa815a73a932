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

from .openloop import CallScore
from .tree import Episode, ToolNode

#: The detection window: an alarm up to DELTA calls after the onset still counts as caught.
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


def load_profiles() -> tuple[str, dict[str, dict[str, float]]]:
    data = tomllib.loads(resources.files("sim").joinpath("profiles/profiles.toml").read_text())
    return str(data["version"]), {k: {w: float(x) for w, x in v.items()} for k, v in data["profiles"].items()}


def episode_outcomes(episode: Episode, alarms: Mapping[str, bool], delta: int = DELTA,
                     error: str | None = None) -> list[Outcome]:
    """Outcomes of one episode given which call nodes alarmed (node id -> alarm).

    A detector that failed on the episode (``error``) gets the worst outcome: FP on a
    clean episode, MISS on every looping path.
    """
    scored_from = int(episode.meta.get("scored_from", 0) or 0)
    index = episode.call_index()
    if not episode.labelled:
        first = min((index[n] for n, a in alarms.items() if a and index.get(n, -1) >= scored_from), default=None)
        return [Outcome(episode.id, episode.family, "episode", "unlabelled", None, first, None, error=error)]
    looping_paths = []
    for path in episode.paths():
        calls = [n for n in path if isinstance(n, ToolNode)]
        onset = next((i for i, n in enumerate(calls) if index[n.id] >= scored_from and n.label is not None and n.label.loop), None)
        if onset is not None:
            looping_paths.append((path[-1].id, calls, onset))
    if not looping_paths:
        if error is not None:
            return [Outcome(episode.id, episode.family, "episode", "fp", None, None, None, error=error)]
        alarmed = [index[n] for n, a in alarms.items() if a and index.get(n, -1) >= scored_from]
        first = min(alarmed, default=None)
        return [Outcome(episode.id, episode.family, "episode", "tn" if first is None else "fp", None, first, None)]
    out = []
    for leaf, calls, onset in looping_paths:
        if error is not None:
            out.append(Outcome(episode.id, episode.family, leaf, "miss", onset, None, None, error=error))
            continue
        a = next((i for i, n in enumerate(calls) if index[n.id] >= scored_from and alarms.get(n.id, False)), None)
        if a is None:
            out.append(Outcome(episode.id, episode.family, leaf, "miss", onset, None, None))
        elif a < onset:
            out.append(Outcome(episode.id, episode.family, leaf, "early", onset, a, None))
        elif a <= onset + delta:
            out.append(Outcome(episode.id, episode.family, leaf, "tp", onset, a, a - onset))
        else:
            out.append(Outcome(episode.id, episode.family, leaf, "miss", onset, a, None, late=True))
    return out


def alarms_from(scores: Sequence[CallScore]) -> dict[str, bool]:
    return {s.node_id: s.verdict.value != "allow" for s in scores}


def nab_credit(delay: int, delta: int = DELTA) -> float:
    """``s(d/Δ - 1) / s(-1)`` with ``s(y) = 2/(1 + e^(5y)) - 1``: 1.0 at d = 0, 0 at d = Δ."""
    s = lambda y: 2.0 / (1.0 + math.exp(5.0 * y)) - 1.0  # noqa: E731
    return s(delay / delta - 1.0) / s(-1.0)


def composite(outcomes: Iterable[Outcome], weights: Mapping[str, float], delta: int = DELTA) -> float:
    """The NAB-shaped per-episode composite: 0 for a detector that never fires, 100 for a perfect one."""
    a_tp, a_fn, a_fp = weights["A_TP"], weights["A_FN"], weights["A_FP"]
    credits, clean, fp = [], 0, 0
    for o in outcomes:
        if o.outcome in ("tn", "fp"):
            clean += 1
            fp += o.outcome == "fp"
        elif o.outcome == "tp":
            credits.append(a_tp * nab_credit(o.delay or 0, delta))
        elif o.outcome == "miss":
            credits.append(-a_fn)
        elif o.outcome == "early":
            credits.append(-a_fp)
    far = fp / clean if clean else 0.0
    u = (sum(credits) / len(credits) if credits else 0.0) - a_fp * far
    if not credits:
        # No looping episodes: only the false-alarm term remains, scaled like the full score.
        u = a_tp - a_fp * far
    return 100.0 * (u + a_fn) / (a_tp + a_fn)


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
    for o in outcomes:
        if o.outcome in OUTCOMES:
            setattr(c, o.outcome, getattr(c, o.outcome) + 1)
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
