"""Scoring one detector setting over tuning episodes: run it, turn its verdicts into outcomes and metrics."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from detectors.protocol import Verdict

from sim.execute.engines import Engine, as_engine
from sim.config.spec import DetectorSpec
from sim.execute.tasks import OpenResult
from sim.scoring.outcomes import DELTA, Outcome, ScoringUnits, composite, summarize
from sim.scoring.thresholds import HALTING_VERDICTS, CallScores
from scenarios.tree import Episode




# -- running a detector over the episodes -----------------------------------------------------
def run_specs(specs: Sequence[DetectorSpec], episodes: Sequence[Episode], engine: Engine | int = 0,
              progress: bool = False) -> dict[str, OpenResult]:
    """Open-loop results of every spec (label -> result), on ``engine`` (a bare integer: the
    local pool with that many workers)."""
    results = as_engine(engine).run([("open", s) for s in specs], episodes, (), progress=progress)
    return {label: res for (_, label), (res, _) in results.items()}


def call_scores(res: OpenResult, episodes: Sequence[Episode]) -> CallScores:
    """An open-loop result as :class:`CallScores` (scores, tools and stored verdicts per episode)."""
    cs = CallScores()
    for ep in episodes:
        scores = res.scores.get(ep.id)
        if scores is None:
            continue
        tool_of = {n.id: n.call.tool for n in ep.tool_nodes()}
        cs.by_episode[ep.id] = ([s.node_id for s in scores], np.array([s.score for s in scores], dtype=float),
                                [tool_of[s.node_id] for s in scores])
        cs.verdict_alarm[ep.id] = np.array([s.verdict is not Verdict.ALLOW for s in scores], dtype=bool)
        cs.verdict_halt[ep.id] = np.array([s.verdict.value in HALTING_VERDICTS for s in scores], dtype=bool)
    return cs


def verdict_outcomes(units: Mapping[str, ScoringUnits], cs: CallScores, errors: Mapping[str, str],
                     delta: int = DELTA) -> list[Outcome]:
    """Outcomes from the verdicts the detector actually gave (no threshold arithmetic)."""
    out: list[Outcome] = []
    for eid, u in units.items():
        if eid in errors or eid not in cs.by_episode:
            out += u.outcomes({}, delta, error=errors.get(eid, "no stored scores for this episode"))
            continue
        nodes = cs.by_episode[eid][0]
        out += u.outcomes(dict(zip(nodes, cs.verdict_alarm[eid].tolist())), delta)
    return out


def metrics_row(outcomes: Sequence[Outcome], profiles: Mapping[str, Mapping[str, float]], delta: int = DELTA) -> dict:
    row = dict(summarize(outcomes, delta))
    for name, w in profiles.items():
        row[f"score_{name}"] = composite(outcomes, w, delta)
    return row


