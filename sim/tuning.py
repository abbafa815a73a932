"""Parameter sweeps and per-tool tuning of one detector, in open loop.

:func:`run_sweep` scores a grid of parameter values. A detector that names a
``threshold_param`` promises that its scores do not depend on that parameter, so a sweep
of it is one open-loop run and one pass over the stored per-call scores
(:func:`sim.thresholds.sweep`); any other parameter changes what the detector computes,
so each of its grid cells is re-simulated (one open-loop run per cell, on the process
pool). A grid of both runs once per cell of the other parameters and sweeps the
threshold over each run's scores. The result says which mode it used.

:func:`tune` looks for per-tool overrides (``tool_overrides``) that keep the false-alarm
rate on clean episodes within a budget with the fewest misses: coordinate search over
tools, from the configured setting, one candidate override per tool at a time, until a
whole pass changes nothing. Overrides of keys that only move the alarm threshold
(``score >= threshold_for(tool, value)``, e.g. ``exact``'s ``max_repeats`` and
``exempt``) are evaluated from stored scores; every other candidate is re-run.
"""
from __future__ import annotations

import copy
import itertools
import json
import math
import re
import tomllib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from detectors.protocol import Detector, Verdict

from .engines import Engine, as_engine
from .runner import DetectorSpec, OpenResult
from .scoring import DELTA, Outcome, ScoringUnits, composite, scoring_units, summarize
from .thresholds import CallScores, check_contract, sweep
from .tree import Episode

#: Most grid cells one sweep may have: each non-threshold cell is a whole open-loop run.
MAX_CELLS = 400
_MISSING = object()


class TuningError(ValueError):
    """A sweep or tuning request that cannot be served, with a one-line reason."""


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


# -- parameters: parsing --param specs and setting (possibly nested) values -------------------------
@dataclass
class ParamGrid:
    """One swept parameter: its (possibly dotted) name and its values in order."""

    name: str
    values: list[Any]


def _scalar(text: str) -> Any:
    text = text.strip()
    if not text:
        raise TuningError("an empty value")
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _number(text: str, what: str, spec: str) -> int | float:
    v = _scalar(text)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TuningError(f"--param {spec!r}: {what} {text.strip()!r} is not a number")
    return v


def parse_param(spec: str) -> ParamGrid:
    """``P=START:STOP:STEP`` (STOP included), ``P=1,2,3,5`` or ``P=VALUE``."""
    name, eq, rhs = spec.partition("=")
    name = name.strip()
    if not eq or not name or not rhs.strip():
        raise TuningError(f"--param {spec!r}: expected PARAM=START:STOP:STEP or PARAM=V1,V2,...")
    if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)*", name):
        raise TuningError(f"--param {spec!r}: {name!r} is not a parameter name")
    if ":" in rhs and not rhs.strip().startswith(("'", '"')):
        parts = rhs.split(":")
        if len(parts) != 3:
            raise TuningError(f"--param {spec!r}: a range is START:STOP:STEP")
        start, stop, step = (_number(p, w, spec) for p, w in zip(parts, ("start", "stop", "step")))
        if step <= 0:
            raise TuningError(f"--param {spec!r}: the step must be positive")
        if stop < start:
            raise TuningError(f"--param {spec!r}: STOP is below START")
        n = int(math.floor((stop - start) / step + 1e-9)) + 1
        if n > MAX_CELLS:
            raise TuningError(f"--param {spec!r}: {n} values, more than {MAX_CELLS}")
        if all(isinstance(x, int) for x in (start, stop, step)):
            values: list[Any] = [start + i * step for i in range(n)]
        else:  # rounded so 0.1 steps print as 0.3, not 0.30000000000000004
            values = [round(start + i * step, 10) for i in range(n)]
    else:
        try:
            values = [_scalar(p) for p in rhs.split(",")]
        except TuningError:
            raise TuningError(f"--param {spec!r}: an empty value in the list") from None
    if len(set(map(repr, values))) != len(values):
        raise TuningError(f"--param {spec!r}: a value is repeated")
    return ParamGrid(name, values)


def get_param(params: Mapping[str, Any], name: str) -> Any:
    """The value at a dotted name (``tool_overrides.http_get.max_repeats``), or ``_MISSING``."""
    cur: Any = params
    for part in name.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def with_param(params: Mapping[str, Any], name: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``params`` with the dotted ``name`` set (``_MISSING`` removes it)."""
    out = copy.deepcopy(dict(params))
    parts = name.split(".")
    cur = out
    for part in parts[:-1]:
        nxt = cur.get(part)
        nxt = dict(nxt) if isinstance(nxt, Mapping) else {}
        cur[part] = nxt
        cur = nxt
    if value is _MISSING:
        cur.pop(parts[-1], None)
    else:
        cur[parts[-1]] = value
    return out


def _fmt(v: Any) -> str:
    if v is _MISSING or v is None:
        return "(unset)"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# -- sweeps -----------------------------------------------------------------------------------------
@dataclass
class SweepResult:
    label: str
    params: list[str]
    rows: list[dict[str, Any]]  # one per grid cell (plus the default when it is off the grid)
    mode: str  # "stored-scores", "hybrid" or "re-simulated"
    explanation: str
    runs: int  # open-loop runs made


def run_sweep(spec: DetectorSpec, grids: Sequence[ParamGrid], episodes: Sequence[Episode],
              profiles: Mapping[str, Mapping[str, float]], *, delta: int = DELTA, engine: Engine | int = 0,
              progress: bool = False) -> SweepResult:
    """Score ``spec`` at every cell of the grid; see the module docstring for the modes."""
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
            what = ", ".join(f"{n}={_fmt(v)}" for n, v in zip(names, cell))
            raise TuningError(f"detector {spec.label!r} rejects {what}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None

    units = {ep.id: scoring_units(ep) for ep in episodes}
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
                break
            values = [c[ti] for c in groups[key]]
            for cell, outs in zip(groups[key], sweep(units, cs, det, values, delta, res.errors)):
                outcomes[cell] = outs
    if ti is None or broken:
        cspecs = {cell: DetectorSpec(f"cell{i}", spec.spec, cell_params(cell, None)) for i, cell in enumerate(cells)}
        results = run_specs(list(cspecs.values()), episodes, engine, progress)
        runs += len(cspecs)
        for cell, cspec in cspecs.items():
            res = results[cspec.label]
            outcomes[cell] = verdict_outcomes(units, call_scores(res, episodes), res.errors, delta)

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
        row = {n: (None if v is _MISSING else v) for n, v in zip(names, cell)}
        row["default"] = cell == default_cell
        row.update(metrics_row(outcomes[cell], profiles, delta))
        rows.append(row)
    return SweepResult(spec.label, names, rows, mode, why, runs)


def plot_sweep(result: SweepResult, path, delta: int = DELTA):
    """The trade-off plot: false alarms vs misses per cell (default starred), and the score per cell."""
    from .plots import _save, plt

    rows, names = result.rows, result.params
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11.5, 4.6))
    far = np.array([np.nan if r["false_alarm_rate"] is None else 100 * r["false_alarm_rate"] for r in rows])
    miss = np.array([np.nan if r["miss_rate"] is None else 100 * r["miss_rate"] for r in rows])
    score = np.array([np.nan if r["score_standard"] is None else r["score_standard"] for r in rows])
    label = [", ".join(_fmt(r[n]) for n in names) for r in rows]
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
        ax2.set_xticks(range(len(xs)), [_fmt(x) for x in xs], fontsize=8)
        ax2.set_yticks(range(len(ys)), [_fmt(y) for y in ys], fontsize=8)
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
    return _save(fig, path)


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


# -- tuning per-tool overrides ---------------------------------------------------------------------
#: Per-tool candidates of the built-in detectors that take ``tool_overrides``, least permissive
#: first, and the keys that only move the alarm threshold (evaluated from stored scores).
#: A plug-in declares its own as class attributes ``tune_candidates`` / ``tune_fast_keys``.
CANDIDATES: dict[str, tuple[dict[str, tuple], tuple[str, ...]]] = {
    "detectors.exact:ExactDetector": ({"max_repeats": (1, 2, 3, 4, 5), "exempt": (True,)}, ("max_repeats", "exempt")),
    "detectors.normalized:NormalizedDetector": ({"threshold": (2, 3, 4, 5, 6), "exempt": (True,)}, ("threshold", "exempt")),
    # roo_code leaves exempt calls out of its run of identical calls: exempting changes scores.
    "detectors.field.roo_code:RooCodeDetector": ({"limit": (2, 3, 4, 5, 6), "exempt": (True,)}, ("limit",)),
    # exempt calls are invisible to later calls, and min_similar changes the score itself.
    "detectors.embedding:EmbeddingDetector": ({"threshold": (0.8, 0.85, 0.9, 0.95), "min_similar": (2, 3),
                                               "exempt": (True,)}, ("threshold",)),
    # progress_guard has no threshold_param: every candidate is a re-run.
    "detectors.progress_guard:ProgressGuard": ({"mode": ("default", "mutating", "retry", "poll", "exempt"),
                                                "max_retries": (1, 2, 3, 5), "poll_limit": (5, 10, 50),
                                                "same_error_limit": (2, 3, 4), "patience": (2, 3, 4, 5),
                                                "similarity": (0.85, 0.9, 0.95)}, ()),
}


def tool_candidates(cls: type) -> tuple[dict[str, tuple], tuple[str, ...]]:
    """(per-tool key -> candidate values, keys evaluable from stored scores) for a detector class."""
    if "tool_overrides" not in cls.param_names():
        raise TuningError(f"{cls.__name__} takes no tool_overrides, so there is nothing to tune per tool "
                          f"(detectors that can: {', '.join(tunable_detectors()) or 'none'})")
    own = getattr(cls, "tune_candidates", None)
    if own:
        return {k: tuple(v) for k, v in own.items()}, tuple(getattr(cls, "tune_fast_keys", ()))
    for klass in cls.__mro__:
        hit = CANDIDATES.get(f"{klass.__module__}:{klass.__qualname__}")
        if hit:
            return hit
    raise TuningError(f"{cls.__name__} takes tool_overrides but declares no per-tool candidates; give the class "
                      "tune_candidates = {KEY: (VALUES...)} (and tune_fast_keys for threshold-only keys)")


def tunable_detectors() -> list[str]:
    from detectors.registry import available, detector_class

    out = []
    for name in available():
        try:
            if "tool_overrides" in detector_class(name).param_names():
                out.append(name)
        except Exception:  # noqa: BLE001 — a broken plug-in must not hide the others
            pass
    return out


Overrides = dict[str, dict[str, Any]]


def _canon(o: Overrides) -> str:
    return json.dumps(o, sort_keys=True, default=repr)


@dataclass
class Evaluation:
    """How one override setting does on the tuning episodes."""

    outcomes: list[Outcome]
    alarms: int  # alarmed calls (more = less permissive)
    counts: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.counts = Counter(o.outcome for o in self.outcomes)

    @property
    def clean(self) -> int:
        return self.counts["tn"] + self.counts["fp"]

    def key(self, budget: float) -> tuple:
        """Lexicographic: false alarms over the budget, misses, early alarms, then strictest."""
        c = self.counts
        excess = max(0.0, c["fp"] - budget * self.clean)
        return (round(excess, 9), c["miss"], c["early"], -self.alarms)

    @property
    def far(self) -> float | None:
        return self.counts["fp"] / self.clean if self.clean else None

    def misses_by_family(self) -> Counter:
        return Counter(o.family for o in self.outcomes if o.outcome == "miss")

    def adds_misses(self, than: "Evaluation") -> bool:
        """True when some family has more misses here than in ``than``."""
        mine, theirs = self.misses_by_family(), than.misses_by_family()
        return any(n > theirs.get(f, 0) for f, n in mine.items())


class Evaluator:
    """Outcomes of override settings on fixed episodes, re-running the detector only when it must."""

    def __init__(self, spec: DetectorSpec, episodes: Sequence[Episode], fast_keys: Sequence[str], *,
                 delta: int = DELTA, engine: Engine | int = 0, progress: bool = False):
        self.spec, self.episodes, self.delta, self.engine, self.progress = spec, list(episodes), delta, engine, progress
        base = spec.build()
        self.tp = base.threshold_param
        self.value = getattr(base, self.tp) if self.tp else None
        self.fast_keys = set(fast_keys) if self.tp else set()
        self.units = {ep.id: scoring_units(ep) for ep in self.episodes}
        self.runs: dict[str, tuple[CallScores, dict[str, str]]] = {}
        self.memo: dict[str, dict[bytes, list[Outcome]]] = defaultdict(dict)
        self.open_runs = 0
        self.notes: list[str] = []
        self.tools = sorted({n.call.tool for ep in self.episodes for n in ep.tool_nodes()})
        self._tool_index = {t: i for i, t in enumerate(self.tools)}
        self._ep_tools: dict[str, np.ndarray] = {}

    def _slow(self, o: Overrides) -> Overrides:
        out = {t: {k: v for k, v in e.items() if k not in self.fast_keys} for t, e in o.items()}
        return {t: e for t, e in out.items() if e}

    def _spec(self, label: str, o: Overrides) -> DetectorSpec:
        return DetectorSpec(label, self.spec.spec, {**self.spec.params, "tool_overrides": o or None})

    def evaluate(self, settings: Sequence[Overrides]) -> list[Evaluation]:
        keys = [_canon(self._slow(o)) for o in settings]
        todo = {k: self._slow(o) for k, o in zip(keys, settings) if k not in self.runs}
        if todo:
            specs = {k: self._spec(f"run{i}", o) for i, (k, o) in enumerate(todo.items())}
            results = run_specs(list(specs.values()), self.episodes, self.engine, self.progress)
            self.open_runs += len(specs)
            for k, s in specs.items():
                res = results[s.label]
                cs = call_scores(res, self.episodes)
                if self.fast_keys:
                    det = s.build()
                    bad, total = check_contract(det, cs, self.value)
                    if bad:  # the shortcut is not valid for this detector: re-run every setting
                        self.notes.append(f"{bad} of {total} stored verdicts disagree with score >= threshold_for; "
                                          "every candidate was re-run")
                        self.fast_keys = set()
                        self.runs.clear()
                        return self.evaluate(settings)
                self.runs[k] = (cs, dict(res.errors))
        return [self._evaluate_one(o, k) for o, k in zip(settings, keys)]

    def _evaluate_one(self, o: Overrides, run_key: str) -> Evaluation:
        cs, errors = self.runs[run_key]
        if self.fast_keys:
            det = self._spec("eval", o).build()
            thr = np.array([float(det.threshold_for(t, self.value)) for t in self.tools])
        outcomes: list[Outcome] = []
        alarms = 0
        for eid, u in self.units.items():
            if eid in errors or eid not in cs.by_episode:
                outcomes += u.outcomes({}, self.delta, error=errors.get(eid, "no stored scores for this episode"))
                continue
            nodes, scores, tools = cs.by_episode[eid]
            if self.fast_keys:
                idx = self._ep_tools.get(eid)
                if idx is None:
                    idx = self._ep_tools[eid] = np.array([self._tool_index[t] for t in tools], dtype=int)
                alarm = scores >= thr[idx]
            else:
                alarm = cs.verdict_alarm[eid]
            alarms += int(alarm.sum())
            memo = self.memo[eid]
            kb = alarm.tobytes()
            if kb not in memo:
                memo[kb] = u.outcomes(dict(zip(nodes, alarm.tolist())), self.delta)
            outcomes += memo[kb]
        return Evaluation(outcomes, alarms)


@dataclass
class TuneStep:
    pass_no: int
    tool: str
    setting: dict[str, Any] | None  # None: back to the configured setting
    far: float | None
    misses: int


@dataclass
class TuneResult:
    label: str
    budget: float
    base: Overrides
    tuned: Overrides
    base_eval: Evaluation
    tuned_eval: Evaluation
    steps: list[TuneStep]
    passes: int
    open_runs: int
    fast: bool
    notes: list[str]

    @property
    def changed(self) -> Overrides:
        """The tools whose setting the search changed."""
        tools = set(self.base) | set(self.tuned)
        return {t: self.tuned.get(t, {}) for t in sorted(tools) if self.base.get(t) != self.tuned.get(t)}

    @property
    def met(self) -> bool:
        far = self.tuned_eval.far
        return far is not None and far <= self.budget + 1e-12


def _with_tool(current: Overrides, tool: str, setting: dict | None, base: Overrides) -> Overrides:
    out = {t: dict(e) for t, e in current.items()}
    if setting is None:
        if tool in base:
            out[tool] = dict(base[tool])
        else:
            out.pop(tool, None)
    else:
        out[tool] = dict(setting)
    return out


def tune(spec: DetectorSpec, episodes: Sequence[Episode], budget: float, *, delta: int = DELTA, engine: Engine | int = 0,
         tools: Sequence[str] | None = None, keep_misses: bool = False, max_passes: int = 6, progress: bool = False,
         log: Callable[[str], None] = lambda s: None) -> TuneResult:
    """Coordinate search for per-tool overrides within a false-alarm budget (module docstring).

    With ``keep_misses`` a setting that gives any family more misses than the configured
    setting is never taken, even when the budget is then not met.
    """
    from detectors.registry import detector_class

    cands, fast_keys = tool_candidates(detector_class(spec.spec))
    ev = Evaluator(spec, episodes, fast_keys, delta=delta, engine=engine, progress=progress)
    base: Overrides = {t: dict(e) for t, e in (spec.params.get("tool_overrides") or {}).items()}
    unknown = [t for t in (tools or ()) if t not in ev.tools]
    if unknown:
        raise TuningError(f"--tools: {', '.join(unknown)} never called in the tuning episodes "
                          f"(tools called: {', '.join(ev.tools)})")
    base_eval = ev.evaluate([base])[0]
    # Tools behind the most false alarms first: the search then settles in fewer passes.
    node_tool = {(ep.id, n.id): n.call.tool for ep in episodes for n in ep.tool_nodes()}
    blame = Counter(_first_alarm_tool(ev.units[o.episode], o, node_tool) for o in base_eval.outcomes
                    if o.outcome in ("fp", "early") and o.first_alarm is not None)
    order = sorted(tools or ev.tools, key=lambda t: (-blame.get(t, 0), t))
    options: list[dict | None] = [None] + [{k: v} for k, vals in cands.items() for v in vals]
    current, cur_eval = base, base_eval
    steps: list[TuneStep] = []
    passes = 0
    for passes in range(1, max_passes + 1):
        changed = False
        for tool in order:
            trials = [_with_tool(current, tool, opt, base) for opt in options]
            evals = ev.evaluate(trials)
            keys = [(math.inf,) if keep_misses and e.adds_misses(base_eval) else e.key(budget) + (i,)
                    for i, e in enumerate(evals)]
            cur = next((i for i, t in enumerate(trials) if t == current), None)
            cur_key = keys[cur] if cur is not None else cur_eval.key(budget) + (len(trials),)
            best = min(range(len(trials)), key=keys.__getitem__)
            if keys[best] < cur_key:
                current, cur_eval, changed = trials[best], evals[best], True
                steps.append(TuneStep(passes, tool, options[best], cur_eval.far, cur_eval.counts["miss"]))
                log(f"pass {passes}: {tool} -> {_setting_text(options[best])} (false-alarm rate "
                    f"{_pct(cur_eval.far)}, {cur_eval.counts['miss']} misses)")
        if not changed:
            break
    return TuneResult(spec.label, budget, base, current, base_eval, cur_eval, steps, passes, ev.open_runs,
                      bool(ev.fast_keys), ev.notes)


def _first_alarm_tool(u: ScoringUnits, o: Outcome, node_tool: Mapping[tuple[str, str], str]) -> str:
    """The tool of the call that raised an outcome's first alarm."""
    if o.unit == "episode":
        node = next((n for n, i in u.clean if i == o.first_alarm), None)
    else:
        path = next((calls for leaf, calls, _ in u.looping if leaf == o.unit), ())
        node = path[o.first_alarm] if o.first_alarm is not None and o.first_alarm < len(path) else None
    return node_tool.get((o.episode, node), "") if node else ""


def _setting_text(setting: Mapping[str, Any] | None) -> str:
    if not setting:
        return "as configured"
    return ", ".join(f"{k} = {toml_value(v)}" for k, v in setting.items())


def setting_text(setting: Mapping[str, Any] | None) -> str:
    """A tool's override as TOML assignments."""
    return _setting_text(setting)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


# -- TOML output ------------------------------------------------------------------------------------
def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if math.isnan(v):
            return "nan"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def _tomlable(v: Any) -> bool:
    try:
        toml_value(v)
        return True
    except TypeError:
        return False


def overrides_toml(label: str, params: Mapping[str, Any], overrides: Overrides, header: Sequence[str] = ()) -> str:
    """A configuration file ``loopbench run --config`` reads: global parameters and per-tool tables."""
    lines = [f"# {h}" if h else "#" for h in header]
    if lines:
        lines.append("")
    table = f"detectors.{toml_key(label)}"
    lines.append(f"[{table}]")
    for k, v in params.items():
        if k != "tool_overrides" and v is not None and _tomlable(v):
            lines.append(f"{toml_key(k)} = {toml_value(v)}")
    for tool in sorted(overrides):
        lines += ["", f"[{table}.tool_overrides.{toml_key(tool)}]"]
        for k, v in overrides[tool].items():
            lines.append(f"{toml_key(k)} = {toml_value(v)}")
    return "\n".join(lines) + "\n"
