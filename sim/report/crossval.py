"""Leave-one-corpus-out (LOCO): what a run on real traces says about corpora nobody tuned on.

On a run over real traces whose families are corpora (``real-dev``: τ-bench airline, ReAct
HotpotQA and, with ``--corpus``, Who&When Magentic-One and CaptainAgent; or a replay of a
user's own imported traces, one family per source), every detector's tuned value is chosen
twice for each corpus *c*:

- **in-sample**: on all corpora, *c* included (what a figure on the dev traces reports);
- **held-out**: on the *other* corpora only, then scored on *c*, which the choice never saw.

What is tuned per fold is the detector's alarm threshold (its ``threshold_param``), picked by
the same rule as the report's ``calibrated_heldout`` point (the best standard score,
ties to the value nearest the run's) from the stored per-call scores
(:func:`sim.report.analysis.swept_totals`). What a threshold cannot say comes in as a
:class:`Grid` of re-simulated variants (:mod:`sim.tuning.loco`): a default chosen per fold
like a threshold (``--cv-param``), or the detector without the rules written from each
corpus, which that corpus is scored with held out (``heldout_cells``, ``--cv-rules``). A
detector with neither is scored as run in both columns (gap 0) (see docs/detectors.md).

The intervals come from the report's one bootstrap (:class:`sim.scoring.uncertainty.Bootstrap`,
episodes resampled within each corpus), with the selection redone in every round; a gap and a
difference against the reference detector are paired (same rounds). Deterministic given the
bootstrap seed.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from scenarios.injected_suite import INJECTED_FAMILIES, is_injected, source_corpus
from sim.numbers import as_float
from sim.report.analysis import Analysis, RunData, open_loop_data, swept_totals
from sim.scoring.outcomes import Outcome, load_profiles
from sim.scoring.thresholds import heldout_totals, pick_best, take
from sim.scoring.uncertainty import FIELDS, episode_totals, metrics_from_totals, percentile_interval, score_from_totals

POOLED = "pooled"
#: The ``param`` of a detector whose held-out cells are its variants without a corpus's rules.
RULES_PARAM = "rules"
REFERENCE = "exact"
#: The figures reported per detector and corpus, in this order.
METRICS = ("score_standard", "recall", "early_rate", "false_alarm_rate", "recall_minus_far")
CV_COLUMNS = ["detector", "corpus", "metric", "param", "value_as_run", "value_in_sample", "value_heldout",
              "as_run", "in_sample", "in_lo", "in_hi", "heldout", "heldout_lo", "heldout_hi",
              "gap", "gap_lo", "gap_hi", "reference", "vs_reference", "vs_reference_lo", "vs_reference_hi"]


class CrossValError(ValueError):
    """The run cannot be cross-validated by corpus (one line, for the CLI)."""


def corpus_metrics(t: np.ndarray, profiles) -> dict[str, np.ndarray]:
    """:data:`METRICS` from totals ``t[..., FIELDS]`` (any leading axes); NaN where undefined."""
    m = metrics_from_totals(t, profiles)
    looping = t[..., FIELDS.index("looping")]
    tp = t[..., FIELDS.index("tp")]
    recall = np.divide(tp, looping, out=np.full(np.shape(tp), np.nan), where=looping > 0)
    return {"score_standard": m["score_standard"], "recall": recall, "early_rate": m["early_rate"],
            "false_alarm_rate": m["false_alarm_rate"], "recall_minus_far": recall - m["false_alarm_rate"]}


def check_run(data: RunData) -> list[str]:
    """The run's corpora (its families, sorted); :class:`CrossValError` when it cannot be split by corpus."""
    where = ", ".join(str(d) for d in data.dirs)
    for m in data.manifests:
        cfg = m.get("config", {})
        if not (cfg.get("real") or cfg.get("suite") == "replay"):
            raise CrossValError(f"{where}: --cv corpus needs a run on real traces (e.g. --suite real-dev, or a replay of "
                                f"imported traces); this is a synthetic run of suite {cfg.get('suite', '?')!r}")
        if is_injected(str(cfg.get("suite", ""))) and set(data.outcomes["family"].astype(str)) & set(INJECTED_FAMILIES):
            raise CrossValError(f"{where}: suite {cfg['suite']!r} reports under injection kinds, not corpora: "
                                "group its episodes by the corpus each was built from first (by_corpus)")
    if not len(data.outcomes):
        raise CrossValError(f"{where}: no open-loop outcomes (episodes.csv) to cross-validate")
    corpora = sorted(set(data.outcomes["family"].astype(str)))
    if len(corpora) < 2:
        raise CrossValError(f"{where}: --cv corpus needs at least 2 corpora (families); this run has "
                            f"{len(corpora)}: {', '.join(corpora) or 'none'}")
    return corpora


def injected_by_corpus(rows: pd.DataFrame) -> pd.DataFrame:
    """``episodes.csv`` / ``calls.csv`` rows of an injected suite with each row's family the
    corpus its episode was built from (the id's prefix), in place of the injection kind."""
    return rows.assign(family=rows["episode"].astype(str).map(source_corpus)) if len(rows) else rows


def by_corpus(data: RunData) -> RunData:
    """``data`` with each episode's family its corpus: as it is for a run whose families are
    corpora (``real-dev``, a replay grouped by source); for ``real-injected``, whose families
    are injection kinds, the corpus each episode was built from."""
    if not any(is_injected(str(m.get("config", {}).get("suite", ""))) for m in data.manifests):
        return data
    return replace(data, outcomes=injected_by_corpus(data.outcomes), calls=injected_by_corpus(data.calls))


def splits_by_corpus(data: RunData) -> bool:
    """Whether the run can be cross-validated by corpus (:func:`check_run` would pass): the
    report's default ``cv="auto"`` adds leave-one-corpus-out exactly then."""
    try:
        check_run(data)
    except CrossValError:
        return False
    return True


@dataclass
class CrossVal:
    """The LOCO table (rows of :data:`CV_COLUMNS`) and what the CLI prints."""

    corpora: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    reference: str | None = None
    rounds: int = 0
    seed: int = 0
    #: Detector -> its held-out standard score in each bootstrap round, ``(rounds, corpora + 1)``
    #: (pooled last); the rounds resample the same episodes for every detector, so rankings
    #: compare round by round (the held-out transfer's τ-b interval).
    heldout_rounds: dict[str, np.ndarray] = field(default_factory=dict)
    #: Detector -> what it was scored with held out: ``(param, values, index per corpus)``,
    #: corpora in :attr:`corpora` order (``param`` None: as run; :data:`RULES_PARAM`: the grid's
    #: variant cells; a threshold parameter: the value chosen on the other corpora).
    picks: dict[str, tuple[str | None, list, list[int]]] = field(default_factory=dict)

    def get(self, detector: str, corpus: str, metric: str = "score_standard") -> dict[str, Any] | None:
        for r in self.rows:
            if (r["detector"], r["corpus"], r["metric"]) == (detector, corpus, metric):
                return r
        return None

    def detectors(self) -> list[str]:
        """Detectors by pooled held-out score, best first."""
        pooled = {r["detector"]: r["heldout"] for r in self.rows if r["corpus"] == POOLED and r["metric"] == "score_standard"}
        return sorted(pooled, key=lambda d: -(pooled[d] if pooled[d] is not None else -1e9))


@dataclass
class _Folds:
    """One detector's figures per corpus and pooled: point ``(C + 1, …)`` and per round ``(R, C + 1, …)``."""

    param: str | None
    values: list
    default_index: int
    pick_in: np.ndarray  # () index of the value chosen on all corpora
    pick_out: np.ndarray  # (C,) index chosen on the other corpora, per held-out corpus
    as_run: tuple[np.ndarray, np.ndarray]  # totals (C + 1, k), (R, C + 1, k)
    in_sample: tuple[np.ndarray, np.ndarray]
    heldout: tuple[np.ndarray, np.ndarray]


def _with_pool(per_corpus: np.ndarray) -> np.ndarray:
    """``(..., C, k)`` -> ``(..., C + 1, k)``: the pooled totals appended as the last corpus."""
    return np.concatenate([per_corpus, per_corpus.sum(axis=-2, keepdims=True)], axis=-2)


def fold_totals(pf: np.ndarray, d_idx: int, std) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """From per-corpus totals ``(..., C, V, k)``: (as-run, in-sample, held-out totals ``(..., C + 1, k)``,
    held-out picks ``(..., C)``, in-sample pick ``(...)``). The held-out pick for a corpus is made on
    the sum of the other corpora (:func:`heldout_totals`), so it never sees that corpus."""
    score_fn = lambda t: score_from_totals(t, std)  # noqa: E731
    as_run = pf[..., d_idx, :]
    pick_in = pick_best(score_fn(pf.sum(axis=-3)), d_idx)  # (...)
    in_sample = take(pf, np.broadcast_to(pick_in[..., None], pf.shape[:-2]))
    _, pick_out = heldout_totals(pf, score_fn, d_idx)  # (..., C)
    heldout = take(pf, pick_out)
    return _with_pool(as_run), _with_pool(in_sample), _with_pool(heldout), pick_out, pick_in


def variant_folds(pf: np.ndarray, pf_folds: Sequence[np.ndarray], d_idx: int, std) -> tuple[np.ndarray, ...]:
    """:func:`fold_totals` when each held-out corpus has its own variant of the detector: as run
    and in-sample from ``pf`` (``(..., C, V, k)``, the detector as shipped); held out, corpus
    *c*'s value chosen on the other corpora in ``pf_folds[c]`` (the same shape: the variant
    without *c*'s rules, every corpus) and scored on *c* there."""
    score_fn = lambda t: score_from_totals(t, std)  # noqa: E731
    as_run = pf[..., d_idx, :]
    pick_in = pick_best(score_fn(pf.sum(axis=-3)), d_idx)
    in_sample = take(pf, np.broadcast_to(pick_in[..., None], pf.shape[:-2]))
    held, picks = [], []
    for c, pc in enumerate(pf_folds):
        others = pc.sum(axis=-3) - pc[..., c, :, :]
        pick = pick_best(score_fn(others), d_idx)
        held.append(take(pc[..., c, :, :], pick))
        picks.append(pick)
    return (_with_pool(as_run), _with_pool(in_sample), _with_pool(np.stack(held, axis=-2)), np.stack(picks, axis=-1),
            pick_in)


def fixed_folds(pf: np.ndarray, d_idx: int, cells: Sequence[int]) -> tuple[np.ndarray, ...]:
    """:func:`fold_totals` when each corpus's held-out cell is given (``cells[c]``), not chosen:
    in-sample is the run's cell."""
    as_run = pf[..., d_idx, :]
    pick_out = np.broadcast_to(np.asarray(cells, dtype=int), pf.shape[:-2])
    return (_with_pool(as_run), _with_pool(as_run), _with_pool(take(pf, pick_out)), pick_out,
            np.full(pf.shape[:-3], d_idx))


@dataclass
class Grid:
    """A detector's outcomes at every cell of a parameter grid (re-simulated by
    :mod:`sim.tuning.loco`): chosen per fold like a threshold, instead of its stored scores."""

    param: str  # the swept names, comma-joined
    values: list[str]  # each cell as text
    default_index: int  # the cell the run used
    outcomes: list[list[Outcome]]
    #: Per cell, its per-call verdicts (``sim.scoring.thresholds.CallScores``) for the held-out
    #: deployment figures (:mod:`sim.report.cv_deploy`); None for a cell that is the run's own
    #: (its ``calls.csv``).
    calls: Sequence[Any]
    #: Corpus -> the cell it is scored with held out, in place of a choice on the other corpora
    #: (``--cv-rules``: the detector without the rules written from that corpus; such a cell holds
    #: that corpus's episodes only); in-sample is then the run's cell.
    heldout_cells: Mapping[str, int] | None = None
    #: Corpus -> every cell's outcomes for the detector without the rules written from that
    #: corpus (``--cv-param`` with ``--cv-rules``): the held-out choice for the corpus is made,
    #: and scored, on these; as run and in-sample on ``outcomes`` (the detector as shipped).
    fold_outcomes: Mapping[str, list[list[Outcome]]] | None = None
    #: Corpus -> per cell, the per-call verdicts of :attr:`fold_outcomes`' variant (as ``calls``).
    fold_calls: Mapping[str, Sequence[Any]] | None = None


def corpus_cv(data: RunData, *, rounds: int = 1000, seed: int = 0, reference: str = REFERENCE,
              detectors: Sequence[str] | None = None, grids: Mapping[str, Grid] | None = None,
              analysis: Analysis | None = None) -> CrossVal:
    """The leave-one-corpus-out table of a run on real traces (see the module docstring).

    ``grids`` maps a detector to a parameter grid to choose per fold in place of its threshold.
    ``analysis``: the report's analysis of ``data`` (``analyse(..., keep_sweeps=True)``), whose
    bootstrap and threshold sweeps are used instead of computing them again when they are the
    same (same rounds and seed, its families the corpora).
    """
    corpora = check_run(data)
    _, profiles = load_profiles()
    std = profiles["standard"]
    dets = [d for d in (detectors or data.detectors) if d in data.detectors]
    shared = analysis is not None and analysis.open_loop is not None and (analysis.rounds, analysis.seed) == (rounds, seed) \
        and list(analysis.open_loop.boot.groups) == corpora
    ol = analysis.open_loop if shared else open_loop_data(data, rounds, seed, family_text=True, detectors=dets)
    swept = analysis.swept if shared else {}
    boot, index = ol.boot, ol.index
    assert list(boot.groups) == corpora  # both sorted: the corpus axis is the bootstrap's family axis
    folds: dict[str, _Folds] = {}
    for det in dets:
        by_det = {det: ol.by_det[det]}
        if grids and det in grids:
            g = grids[det]
            x = np.stack([episode_totals(o, index, data.delta) for o in g.outcomes], axis=1)  # (N, V, k)
            (point, rounds_t), param, values, d_idx = boot.family_totals(x), g.param, g.values, g.default_index
        elif data.units and det in ol.cgroups:
            st = swept.get(det)
            if st is None:
                st = swept_totals(data, boot, ol.cgroups, by_det, index, ol.errors, det)
            point, rounds_t, param, values, d_idx = st.point, st.rounds, st.param, st.values, st.default_index
        else:  # no stored trace to re-score from: as run
            x = episode_totals(by_det[det], index, data.delta)[:, None, :]
            (point, rounds_t), param, values, d_idx = boot.family_totals(x), None, [None], 0
        fixed = grids[det].heldout_cells if grids and det in grids else None
        by_fold = grids[det].fold_outcomes if grids and det in grids else None
        if by_fold is not None:
            fx = [boot.family_totals(np.stack([episode_totals(o, index, data.delta) for o in by_fold[c]], axis=1))
                  for c in corpora]
            ar_p, in_p, ho_p, pick_out, pick_in = variant_folds(point, [t[0] for t in fx], d_idx, std)
            ar_r, in_r, ho_r, _, _ = variant_folds(rounds_t, [t[1] for t in fx], d_idx, std)
        elif fixed is not None:
            ar_p, in_p, ho_p, pick_out, pick_in = fixed_folds(point, d_idx, [fixed[c] for c in corpora])
            ar_r, in_r, ho_r, _, _ = fixed_folds(rounds_t, d_idx, [fixed[c] for c in corpora])
        else:
            ar_p, in_p, ho_p, pick_out, pick_in = fold_totals(point, d_idx, std)
            ar_r, in_r, ho_r, _, _ = fold_totals(rounds_t, d_idx, std)
        folds[det] = _Folds(param, values, d_idx, pick_in, pick_out, (ar_p, ar_r), (in_p, in_r), (ho_p, ho_r))
    ref = reference if reference in folds else None
    cv = CrossVal(corpora, reference=ref, rounds=rounds, seed=seed)
    names = corpora + [POOLED]
    ref_m = ref_p = None
    if ref is not None:
        ref_m = corpus_metrics(folds[ref].heldout[1], profiles)
        ref_p = corpus_metrics(folds[ref].heldout[0], profiles)
    for det, f in folds.items():
        m = {k: corpus_metrics(t, profiles) for k, t in (("as_run_p", f.as_run[0]), ("in_p", f.in_sample[0]),
                                                         ("ho_p", f.heldout[0]), ("in_r", f.in_sample[1]),
                                                         ("ho_r", f.heldout[1]))}
        cv.heldout_rounds[det] = m["ho_r"]["score_standard"]
        cv.picks[det] = (f.param, list(f.values), [int(i) for i in np.asarray(f.pick_out)[:len(corpora)]])
        for ci, corpus in enumerate(names):
            v_out = "" if corpus == POOLED else _value(f.values[int(f.pick_out[ci])])
            for metric in METRICS:
                ins, ho = m["in_p"][metric][ci], m["ho_p"][metric][ci]
                in_lo, in_hi = percentile_interval(m["in_r"][metric][:, ci])
                ho_lo, ho_hi = percentile_interval(m["ho_r"][metric][:, ci])
                gap_lo, gap_hi = percentile_interval(m["in_r"][metric][:, ci] - m["ho_r"][metric][:, ci])
                row = {"detector": det, "corpus": corpus, "metric": metric, "param": f.param or "",
                       "value_as_run": _value(f.values[f.default_index]),
                       "value_in_sample": _value(f.values[int(f.pick_in)]), "value_heldout": v_out,
                       "as_run": as_float(m["as_run_p"][metric][ci]), "in_sample": as_float(ins), "in_lo": as_float(in_lo),
                       "in_hi": as_float(in_hi), "heldout": as_float(ho), "heldout_lo": as_float(ho_lo), "heldout_hi": as_float(ho_hi),
                       "gap": as_float(ins - ho), "gap_lo": as_float(gap_lo), "gap_hi": as_float(gap_hi),
                       "reference": ref or "", "vs_reference": None, "vs_reference_lo": None, "vs_reference_hi": None}
                if ref_m is not None and ref_p is not None:
                    lo, hi = percentile_interval(m["ho_r"][metric][:, ci] - ref_m[metric][:, ci])
                    row.update(vs_reference=as_float(ho - ref_p[metric][ci]), vs_reference_lo=as_float(lo), vs_reference_hi=as_float(hi))
                cv.rows.append(row)
    return cv




def _value(v) -> str:
    if v is None:
        return ""
    return f"{v:g}" if isinstance(v, float) else str(v)


def cv_text(cv: CrossVal) -> str:
    """A compact plain-text table: per detector, the pooled standard score in-sample and held
    out, the gap, the held-out difference against the reference, and each corpus held out."""
    def f(v, digits: int = 1) -> str:
        return "–" if v is None else f"{v:.{digits}f}"

    width = max([len(d) for d in cv.detectors()] + [8])
    cols = [c[:14] for c in cv.corpora]
    head = (f"{'detector':<{width}}  {'in-sample':>9}  {'held-out':>8}  {'gap':>5}  "
            f"{('vs ' + cv.reference) if cv.reference else '':<22}  " + "  ".join(f"{c:>14}" for c in cols))
    lines = [f"Leave-one-corpus-out, standard score (pooled; then each corpus held out): {', '.join(cv.corpora)}", head]
    for det in cv.detectors():
        p = cv.get(det, POOLED)
        vs = ""
        if cv.reference and det != cv.reference and p["vs_reference"] is not None:
            vs = f"{p['vs_reference']:+.1f} [{f(p['vs_reference_lo'])}, {f(p['vs_reference_hi'])}]"
        held = [cv.get(det, c)["heldout"] for c in cv.corpora]
        lines.append(f"{det:<{width}}  {f(p['in_sample']):>9}  {f(p['heldout']):>8}  {f(p['gap']):>5}  {vs:<22}  "
                     + "  ".join(f"{f(h):>14}" for h in held))
    ruled = sorted({r["detector"] for r in cv.rows if r["param"] == RULES_PARAM})
    if ruled:
        lines.append(f"Held out, {', '.join(ruled)} without the rules written from the held-out corpus; "
                     "in-sample as shipped (--no-cv-rules keeps them in).")
    if (said := verdict(cv)):
        lines.append(said)
    return "\n".join(lines)


def verdict(cv: CrossVal) -> str:
    """What leave-one-corpus-out says about picking a detector, in one or two sentences: the
    held-out leader and whether its lead over the runner-up (paired, the same bootstrap rounds)
    excludes 0; where the dev leader (as run) lands held out, and its difference against the
    reference there."""
    ranked = cv.detectors()
    if len(ranked) < 2:
        return ""
    pooled = {d: cv.get(d, POOLED) for d in ranked}
    if any(pooled[d]["heldout"] is None for d in ranked[:2]):
        return ""

    def gap(a: str, b: str) -> tuple[float, float, float]:
        diff = cv.heldout_rounds[a][:, -1] - cv.heldout_rounds[b][:, -1]
        lo, hi = percentile_interval(diff)
        return float(pooled[a]["heldout"] - pooled[b]["heldout"]), float(lo), float(hi)

    first, second = ranked[0], ranked[1]
    d, lo, hi = gap(first, second)
    apart = lo > 0
    text = (f"Verdict held out: `{first}` leads ({pooled[first]['heldout']:.1f}), {d:+.1f} [{lo:.1f}, {hi:.1f}] over "
            f"`{second}` — {'an interval that excludes 0' if apart else 'not separated: the interval includes 0'}.")
    as_run = {det: pooled[det]["as_run"] for det in ranked if pooled[det]["as_run"] is not None}
    dev_top = max(as_run, key=lambda det: as_run[det]) if as_run else None
    if dev_top is not None and dev_top != first:
        text += (f" The leader as run, `{dev_top}` ({as_run[dev_top]:.1f}), is #{ranked.index(dev_top) + 1} held out "
                 f"({pooled[dev_top]['heldout']:.1f})")
        r = pooled[dev_top]
        if cv.reference and dev_top != cv.reference and r["vs_reference"] is not None:
            text += (f"; against `{cv.reference}` {r['vs_reference']:+.1f} [{r['vs_reference_lo']:.1f}, "
                     f"{r['vs_reference_hi']:.1f}]")
        text += "."
    return text
