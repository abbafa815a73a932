"""Leave-one-corpus-out for defaults a sweep picks: re-simulate a grid once, choose per fold.

A detector's threshold is re-chosen per fold from the scores a run already stored
(:mod:`sim.report.crossval`). Any other parameter changes what the detector computes, so its
grid (``DETECTOR.PARAM=V1,V2,...``, the values ``loopbench sweep`` takes) is re-simulated
over the run's own episodes (``trace.jsonl``) by :func:`sim.tuning.sweep.run_sweep`, once
per cell; the cells' outcomes then go through the same folds as a threshold: the cell with
the best standard score on the other corpora is scored on the held-out one.

A detector's rules are held out too, with ``--cv-rules`` (:func:`unseen_grids`): a detector
that declares which corpora each of its rules and layers was written from
(``Detector.derived_from``) is re-simulated once per corpus with the parts written from that
corpus switched off, and that variant is what the corpus is scored with held out — the
detector as it would be had the corpus never been read. Its in-sample figure is the detector
as shipped, which was written with every corpus in view.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from scenarios.trace import read_trace
from sim.config.provenance import unseen_specs
from sim.config.spec import DetectorSpec
from sim.execute.engines import Engine
from sim.report.analysis import outcome_objects
from sim.report.crossval import RULES_PARAM, Grid, check_run
from sim.scoring.outcomes import DELTA, Outcome, load_profiles, units_by_id
from sim.scoring.thresholds import CallScores
from sim.tuning.evaluate import call_scores, run_specs, verdict_outcomes
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
             delta: int = DELTA, engine: Engine | int = 0, corpora: Sequence[str] | None = None) -> dict[str, Grid]:
    """Each detector's grid re-simulated over the run's episodes, as :class:`Grid` for the folds.

    With ``corpora`` the rules are held out too: a detector that declares where its rules came
    from gets its grid re-simulated once more per corpus without the rules written from that
    corpus (``Grid.fold_outcomes``), and each corpus's value is chosen, and scored, on those."""
    trace = Path(run_dir) / "trace.jsonl"
    if not trace.is_file():
        raise TuningError(f"{run_dir}: no trace.jsonl to re-simulate --cv-param over")
    episodes = read_trace(trace).episodes
    _, profiles = load_profiles()
    out = {}
    for det, det_grids in grids.items():
        spec = DetectorSpec(det, *specs[det])
        res = run_sweep(spec, det_grids, episodes, profiles, delta=delta, engine=engine)
        values = [", ".join(value_text(r[n]) for n in res.params) for r in res.rows]
        default = next(i for i, r in enumerate(res.rows) if r["default"])
        folds = fold_calls = None
        calls = cells_calls(res)
        built = spec.build()
        swept = {g.name.split(".")[0] for g in det_grids}
        variants = unseen_specs(spec, corpora or (), built)
        if any(v is not None for v in variants.values()) and not swept & set(type(built).derived_from):
            folds, fold_calls = {}, {}
            for c, variant in variants.items():
                if variant is None:
                    folds[c], fold_calls[c] = res.outcomes, calls
                    continue
                fres = run_sweep(variant, det_grids, episodes, profiles, delta=delta, engine=engine)
                if [[r[n] for n in fres.params] for r in fres.rows] != [[r[n] for n in res.params] for r in res.rows]:
                    raise TuningError(f"--cv-param {det}: without {c}'s rules the grid has other cells")
                folds[c], fold_calls[c] = fres.outcomes, cells_calls(fres)
        out[det] = Grid(",".join(res.params), values, default, res.outcomes, calls, fold_outcomes=folds,
                        fold_calls=fold_calls)
    return out


def cells_calls(res) -> list[CallScores]:
    """Every cell's per-call verdicts of a sweep (``SweepResult``), for the held-out deployment figures."""
    return [res.cell_calls(i) for i in range(len(res.rows))]


def unseen_grids(run_dir: str | Path, specs: Mapping[str, tuple[str, dict]], corpora: Sequence[str],
                 delta: int = DELTA, engine: Engine | int = 0, detectors: Sequence[str] | None = None,
                 shipped: Mapping[str, list[Outcome]] | None = None,
                 corpus_of: Mapping[str, str] | None = None) -> dict[str, Grid]:
    """For each detector of the run that declares where its rules came from: the detector as
    shipped and, per corpus, as it would be without the parts written from that corpus;
    :class:`Grid` with ``heldout_cells`` naming each corpus's variant. Detectors that declare
    nothing, or nothing from these corpora, are left out. A corpus's variant is simulated over
    that corpus's episodes only (``corpus_of``: episode id -> corpus, default each episode's
    family), the only ones it is scored on; the shipped cell covers every episode, and is the
    run's own outcomes (``shipped``) when given instead of simulating it again."""
    todo = {}
    for det in detectors or specs:
        spec = DetectorSpec(det, *specs[det])
        variants = unseen_specs(spec, corpora)
        if any(v is not None for v in variants.values()):
            todo[det] = (spec, variants)
    if not todo:
        return {}
    trace = Path(run_dir) / "trace.jsonl"
    if not trace.is_file():
        raise TuningError(f"{run_dir}: no trace.jsonl to re-simulate --cv-rules over")
    episodes = read_trace(trace).episodes
    of = corpus_of or {}
    by_corpus: dict[str, list] = {}
    for ep in episodes:
        by_corpus.setdefault(of.get(ep.id, ep.family), []).append(ep)

    def simulate(cell: DetectorSpec, eps: list) -> tuple[CallScores, list[Outcome]]:
        res = run_specs([cell], eps, engine)[cell.label]
        cs = call_scores(res, eps)
        return cs, verdict_outcomes(units_by_id(eps), cs, res.errors, delta)

    out = {}
    for det, (spec, variants) in todo.items():
        stored = (shipped or {}).get(det)
        calls, outcomes = [None], [stored]
        if stored is None:
            calls[0], outcomes[0] = simulate(spec, episodes)
        heldout = {}
        for corpus, variant in variants.items():
            if variant is None:
                heldout[corpus] = 0
                continue
            heldout[corpus] = len(outcomes)
            cs, outs = simulate(variant, by_corpus.get(corpus, []))
            calls.append(cs)
            outcomes.append(outs)
        values = ["as shipped"] + [f"without {c}'s rules" for c, i in heldout.items() if i]
        out[det] = Grid(RULES_PARAM, values, 0, outcomes, calls, heldout_cells=heldout)
    return out


def rule_grids(data, taken: set[str], notes: list[str]) -> dict[str, Grid]:
    """:func:`unseen_grids` for a loaded run (``sim.report.analysis.RunData``) on real traces,
    for its detectors not in ``taken`` (those already have a grid: ``--cv-param``, which holds
    their rules out itself when given the corpora); what cannot be held out, and why, goes to
    ``notes``."""
    if len(data.dirs) > 1:
        notes.append("leave-one-corpus-out kept every detector's rules in: holding them out re-simulates one run "
                     "folder's episodes, and this report pools several")
        return {}
    todo = [d for d in data.detectors if d not in taken]
    out = data.outcomes
    return unseen_grids(data.dirs[0], data.specs, check_run(data), data.delta, detectors=todo,
                        shipped={d: outcome_objects(out[out["detector"] == d]) for d in todo},
                        corpus_of=dict(zip(out["episode"].astype(str), out["family"].astype(str))))
