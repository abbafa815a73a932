"""Leave-one-corpus-out for defaults a sweep picks: re-simulate a grid once, choose per fold.

A detector's threshold is re-chosen per fold from the scores a run already stored
(:mod:`sim.report.crossval`). Any other parameter changes what the detector computes, so its
grid (``DETECTOR.PARAM=V1,V2,...``, the values ``loopbench sweep`` takes) is re-simulated
over the run's own episodes (``trace.jsonl``) by :func:`sim.tuning.sweep.run_sweep`, once
per cell; the cells' outcomes then go through the same folds as a threshold: the cell with
the best standard score on the other corpora is scored on the held-out one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from scenarios.trace import read_trace
from sim.config.spec import DetectorSpec
from sim.execute.engines import Engine
from sim.report.crossval import Grid
from sim.scoring.outcomes import DELTA, load_profiles
from sim.tuning.params import ParamGrid, TuningError, parse_param, value_text
from sim.tuning.sweep import run_sweep, sweep_cells


def parse_cv_params(items: Sequence[str], specs: Mapping[str, tuple[str, dict]]) -> dict[str, list[ParamGrid]]:
    """``DETECTOR.PARAM=V1,V2`` (repeatable; several for one detector make a grid) -> grids by
    detector; :class:`TuningError` for a malformed item or a detector the run did not score."""
    out: dict[str, list[ParamGrid]] = {}
    for item in items:
        det, dot, rest = item.partition(".")
        if not dot or not rest:
            raise TuningError(f"--cv-param {item!r}: expected DETECTOR.PARAM=V1,V2,...")
        if det not in specs:
            raise TuningError(f"--cv-param {item!r}: the run did not score a detector {det!r} "
                              f"(it scored: {', '.join(specs) or 'none'})")
        out.setdefault(det, []).append(parse_param(rest))
    for det, grids in out.items():
        spec, params = specs[det]
        sweep_cells(DetectorSpec(det, spec, params), grids)  # every value checked before any run
    return out


def cv_grids(run_dir: str | Path, specs: Mapping[str, tuple[str, dict]], grids: Mapping[str, list[ParamGrid]],
             delta: int = DELTA, engine: Engine | int = 0) -> dict[str, Grid]:
    """Each detector's grid re-simulated over the run's episodes, as :class:`Grid` for the folds."""
    trace = Path(run_dir) / "trace.jsonl"
    if not trace.is_file():
        raise TuningError(f"{run_dir}: no trace.jsonl to re-simulate --cv-param over")
    episodes = read_trace(trace).episodes
    _, profiles = load_profiles()
    out = {}
    for det, det_grids in grids.items():
        spec, params = specs[det]
        res = run_sweep(DetectorSpec(det, spec, params), det_grids, episodes, profiles, delta=delta, engine=engine)
        values = [", ".join(value_text(r[n]) for n in res.params) for r in res.rows]
        default = next(i for i, r in enumerate(res.rows) if r["default"])
        out[det] = Grid(",".join(res.params), values, default, res.outcomes)
    return out
