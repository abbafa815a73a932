"""Parameter sweeps of one detector, in open loop.

:func:`run_sweep` scores a grid of parameter values. A detector that names a
``threshold_param`` promises that its scores do not depend on that parameter, so a sweep
of it is one open-loop run and one pass over the stored per-call scores
(:func:`sim.scoring.thresholds.sweep`); any other parameter changes what the detector computes,
so each of its grid cells is re-simulated (one open-loop run per cell, on the process
pool). A grid of both runs once per cell of the other parameters and sweeps the
threshold over each run's scores. The result says which mode it used.
"""
from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from detectors.params import ParamError
from detectors.protocol import Detector


from sim.execute.engines import Engine
from sim.config.spec import DetectorSpec
from sim.scoring.outcomes import DELTA, Outcome, units_by_id
from sim.scoring.thresholds import CallScores, check_contract, sweep
from scenarios.tree import Episode


from sim.tuning.evaluate import call_scores, metrics_row, run_specs, verdict_outcomes
from sim.tuning.params import MAX_CELLS, MISSING, ParamGrid, TuningError, get_param, value_text, with_param


# -- sweeps -----------------------------------------------------------------------------------------
@dataclass
class SweepResult:
    label: str
    params: list[str]
    rows: list[dict[str, Any]]  # one per grid cell (plus the default when it is off the grid)
    mode: str  # "stored-scores", "hybrid" or "re-simulated"
    explanation: str
    runs: int  # open-loop runs made
    #: Every cell's outcomes (the cells of ``rows``, in order), for callers that re-aggregate
    #: them (leave-one-corpus-out: ``sim.tuning.loco``).
    outcomes: list[list[Outcome]] = field(default_factory=list)
    #: Every cell's per-call evidence, as (the open-loop run's scores, and for a cell swept over
    #: those scores the detector and threshold value to judge them at); see :meth:`cell_calls`.
    evidence: list[tuple[CallScores, Detector | None, Any]] = field(default_factory=list)

    def cell_calls(self, i: int) -> CallScores:
        """Cell ``i``'s per-call verdicts (for the deployment figures of a cell chosen per fold)."""
        cs, detector, value = self.evidence[i]
        return cs if detector is None else cs.at_threshold(detector, value)


def sweep_cells(spec: DetectorSpec, grids: Sequence[ParamGrid]) -> tuple[Detector, list[str], list[tuple], tuple]:
    """The detector at its defaults, the swept names, every cell (the default added when off
    the grid) and the default cell, each cell's detector built once so a refused value is a TuningError before any run."""
    base = spec.build()
    accepted = base.param_names()
    names = [g.name for g in grids]
    dupes = [n for n, c in Counter(names).items() if c > 1]
    if dupes:
        raise TuningError(f"--param {dupes[0]} given twice; list its values once (P=1,2,3)")
    for n in names:
        if n.split(".")[0] not in accepted:
            raise TuningError(f"detector {spec.label!r} has no parameter {n.split('.')[0]!r} "
                              f"(it takes: {', '.join(accepted) or 'none'})")
    cells = [tuple(c) for c in itertools.product(*(g.values for g in grids))]
    if len(cells) > MAX_CELLS:
        raise TuningError(f"the grid has {len(cells)} cells, more than {MAX_CELLS}")
    defaults = {**spec.params, **base.get_params()}
    default_cell = tuple(get_param(defaults, n) for n in names)
    if default_cell not in cells:
        cells.append(default_cell)
    for cell in cells:  # a constructor may reject a value: say which, before any run
        params = dict(spec.params)
        for n, v in zip(names, cell):
            params = with_param(params, n, v)
        try:
            DetectorSpec(spec.label, spec.spec, params).build()
        except Exception as exc:  # noqa: BLE001
            what = ", ".join(f"{n}={value_text(v)}" for n, v in zip(names, cell))
            if isinstance(exc, ParamError):
                raise TuningError(f"detector {spec.label!r}: {exc}") from None
            raise TuningError(f"detector {spec.label!r} rejects {what}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None

    return base, names, cells, default_cell


def run_sweep(spec: DetectorSpec, grids: Sequence[ParamGrid], episodes: Sequence[Episode],
              profiles: Mapping[str, Mapping[str, float]], *, delta: int = DELTA, engine: Engine | int = 0,
              progress: bool = False) -> SweepResult:
    """Score ``spec`` at every cell of the grid; see the module docstring for the modes."""
    base, names, cells, default_cell = sweep_cells(spec, grids)
    units = units_by_id(episodes)
    tp = base.threshold_param
    ti = names.index(tp) if tp in names else None
    if ti is not None and any(isinstance(c[ti], bool) or not isinstance(c[ti], (int, float)) for c in cells):
        ti = None  # a non-numeric threshold cannot be compared with scores

    def cell_params(cell, skip: int | None) -> dict:
        params = dict(spec.params)
        for i, (n, v) in enumerate(zip(names, cell)):
            if i != skip:
                params = with_param(params, n, v)
        return params

    outcomes: dict[tuple, list[Outcome]] = {}
    evidence: dict[tuple, tuple[CallScores, Detector | None, Any]] = {}
    runs = 0
    broken = ""
    if ti is not None:
        groups: dict[tuple, list[tuple]] = defaultdict(list)
        for cell in cells:
            groups[cell[:ti] + cell[ti + 1:]].append(cell)
        gspecs = {key: DetectorSpec(f"group{i}", spec.spec, cell_params(cs_[0], ti)) for i, (key, cs_) in enumerate(groups.items())}
        results = run_specs(list(gspecs.values()), episodes, engine, progress)
        runs += len(gspecs)
        for key, gspec in gspecs.items():
            res = results[gspec.label]
            cs = call_scores(res, episodes)
            det = gspec.build()
            bad, total = check_contract(det, cs, getattr(det, tp))
            if bad:
                broken = (f"{bad} of {total} stored verdicts disagree with score >= threshold_for(tool, value), "
                          "so every cell was re-simulated")
                outcomes.clear()
                evidence.clear()
                break
            values = [c[ti] for c in groups[key]]
            for cell, outs in zip(groups[key], sweep(units, cs, det, values, delta, res.errors)):
                outcomes[cell] = outs
                evidence[cell] = (cs, det, cell[ti])
    if ti is None or broken:
        cspecs = {cell: DetectorSpec(f"cell{i}", spec.spec, cell_params(cell, None)) for i, cell in enumerate(cells)}
        results = run_specs(list(cspecs.values()), episodes, engine, progress)
        runs += len(cspecs)
        for cell, cspec in cspecs.items():
            res = results[cspec.label]
            cs = call_scores(res, episodes)
            outcomes[cell] = verdict_outcomes(units, cs, res.errors, delta)
            evidence[cell] = (cs, None, None)

    others = [n for i, n in enumerate(names) if i != ti]
    if ti is not None and not broken and not others:
        mode = "stored-scores"
        why = (f"one pass over stored scores: {tp} is {spec.label}'s threshold_param, "
               f"so 1 open-loop run gave all {len(cells)} values")
    elif ti is not None and not broken:
        mode = "hybrid"
        why = (f"re-simulated once per cell of {', '.join(others)} ({runs} open-loop runs); "
               f"{tp} (the threshold_param) swept over each run's stored scores")
    else:
        mode = "re-simulated"
        if broken:
            reason = broken
        elif tp is None:
            reason = f"{spec.label} has no threshold_param"
        else:
            reason = f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} not the threshold_param ({tp})"
        why = f"re-simulated: one open-loop run per grid cell ({runs} runs; {reason})"
    rows = []
    for cell in cells:
        row = {n: (None if v is MISSING else v) for n, v in zip(names, cell)}
        row["default"] = cell == default_cell
        row.update(metrics_row(outcomes[cell], profiles, delta))
        rows.append(row)
    return SweepResult(spec.label, names, rows, mode, why, runs, [outcomes[cell] for cell in cells],
                       [evidence[cell] for cell in cells])


def plot_sweep(result: SweepResult, path, delta: int = DELTA):
    """The trade-off plot: false alarms vs misses per cell (default starred), and the score per cell."""
    from sim.report.plots import plt, save

    rows, names = result.rows, result.params
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.5, 4.6))
    far = np.array([np.nan if r["false_alarm_rate"] is None else 100 * r["false_alarm_rate"] for r in rows])
    miss = np.array([np.nan if r["miss_rate"] is None else 100 * r["miss_rate"] for r in rows])
    score = np.array([np.nan if r["score_standard"] is None else r["score_standard"] for r in rows])
    label = [", ".join(value_text(r[n]) for n in names) for r in rows]
    if len(names) == 1:
        order = sorted(range(len(rows)), key=lambda i: (rows[i][names[0]] is None, _sort_key(rows[i][names[0]])))
        ax1.plot(far[order], miss[order], "-", color="tab:blue", lw=1.4, alpha=0.7)
    sc = ax1.scatter(far, miss, c=score, cmap="viridis", s=42, edgecolor="black",
                     linewidths=0.5, zorder=3)
    fig.colorbar(sc, ax=ax1, label="standard score")
    for i in range(len(rows)):
        ax1.annotate(label[i], (far[i], miss[i]), textcoords="offset points", xytext=(5, 4), fontsize=7)
    d = [i for i, r in enumerate(rows) if r["default"]]
    ax1.plot(far[d], miss[d], "*", ms=17, mfc="gold", mec="black", zorder=4, label="default")
    ax1.set_xlabel("false-alarm rate on clean episodes (%)")
    ax1.set_ylabel(f"miss rate on looping paths (%), Δ = {delta}")
    ax1.set_xlim(-3, 103)
    ax1.set_ylim(-3, 103)
    ax1.grid(alpha=0.3)
    ax1.legend(loc="upper right", fontsize=8)
    ax1.set_title("False alarms vs misses, one point per cell", fontsize=10)
    if len(names) == 1:
        n = names[0]
        pts = sorted(((rows[i][n], i) for i in range(len(rows)) if rows[i][n] is not None and
                      isinstance(rows[i][n], (int, float)) and not isinstance(rows[i][n], bool)), key=lambda t: t[0])
        if pts:
            xs = [p[0] for p in pts]
            for prof, colour in (("standard", "black"), ("low_FP", "tab:orange"), ("low_FN", "tab:green")):
                key = f"score_{prof}"
                ax2.plot(xs, [rows[i][key] for _, i in pts], "-o", ms=4, color=colour, label=f"score ({prof})")
            dx = [rows[i][n] for i in d if isinstance(rows[i][n], (int, float))]
            ax2.plot(dx, [rows[i]["score_standard"] for i in d if isinstance(rows[i][n], (int, float))], "*", ms=17,
                     mfc="gold", mec="black", zorder=4, label="default")
            ax2.set_xlabel(n)
            if all(isinstance(x, int) for x in xs):
                ax2.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        else:
            _score_bars(ax2, rows, label, score)
    elif len(names) == 2:
        xs = sorted({r[names[0]] for r in rows}, key=_sort_key)
        ys = sorted({r[names[1]] for r in rows}, key=_sort_key)
        grid = np.full((len(ys), len(xs)), np.nan)
        for r in rows:
            grid[ys.index(r[names[1]]), xs.index(r[names[0]])] = np.nan if r["score_standard"] is None else r["score_standard"]
        im = ax2.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        fig.colorbar(im, ax=ax2, label="standard score")
        ax2.set_xticks(range(len(xs)), [value_text(x) for x in xs], fontsize=8)
        ax2.set_yticks(range(len(ys)), [value_text(y) for y in ys], fontsize=8)
        for r in rows:
            if r["default"]:
                # in the cell's corner, so the score printed at its centre stays readable
                ax2.plot(xs.index(r[names[0]]) - 0.3, ys.index(r[names[1]]) + 0.3, "*", ms=15, mfc="gold", mec="black")
        for yi in range(len(ys)):
            for xi in range(len(xs)):
                if not np.isnan(grid[yi, xi]):
                    ax2.text(xi, yi, f"{grid[yi, xi]:.0f}", ha="center", va="center", fontsize=7, color="white")
        ax2.set_xlabel(names[0])
        ax2.set_ylabel(names[1])
    else:
        _score_bars(ax2, rows, label, score)
    if len(names) == 1:
        ax2.set_ylabel("composite score (0 = never fires, 100 = perfect)")
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=8)
    ax2.set_title("Score per cell" if len(names) != 1 else f"Score vs {names[0]}", fontsize=10)
    fig.suptitle(f"loopbench sweep: {result.label} over {' × '.join(names)} — {result.mode}", fontsize=11)
    fig.tight_layout()
    return save(fig, path)


def _sort_key(v: Any):
    """Numbers in order, then other values by their text, unset last."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, v, "")
    return (2, 0, "") if v is None else (1, 0, str(v))


def _score_bars(ax, rows, label, score) -> None:
    order = np.argsort(-np.nan_to_num(score, nan=-1e9))
    colours = ["gold" if rows[i]["default"] else "tab:blue" for i in order]
    ax.barh(range(len(order)), score[order], color=colours, edgecolor="black", linewidth=0.4)
    ax.set_yticks(range(len(order)), [label[i] for i in order], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("standard score (gold: default)")
    ax.grid(alpha=0.3, axis="x")


