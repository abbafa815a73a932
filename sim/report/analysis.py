"""Everything a report shows, recomputed from run folders: intervals, paired differences,
threshold operating points and the Δ sensitivity view.

Inputs are the files a run writes (``manifest.json``, ``trace.jsonl``, ``calls.csv``,
``episodes.csv``, ``timings.csv``, ``closed.csv``, ``closed_metrics.csv``); nothing is
re-run. Several run folders (several simulator seeds of one configuration) are pooled:
their episodes get a ``r<i>:`` prefix and count as more episodes of each family.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from sim.config.runfolder import read_run_manifest
from sim.files import read_table
from sim.config.spec import DetectorSpec
from sim.forking import default_workers, map_forked
from sim.numbers import as_bool
from sim.scoring.outcomes import DELTA, Outcome, ScoringUnits, composite, load_profiles, summarize
from sim.scoring.thresholds import (FAR_TARGETS, CallScores, candidate_values, check_contract, heldout_totals, pick_best,
                         pick_calibrated, sweep, sweep_metrics, take)
from sim.scoring.trace_units import trace_units
from sim.scoring.uncertainty import (Bootstrap, advisory_counts, episode_totals, metrics_from_totals, percentile_interval,
                                     score_from_totals)

#: Windows of the Δ sensitivity view (calls after the onset).
DELTAS = (0, 1, 2, 3, 5, 8, 10)
PAIRED_METRICS = ("score_standard", "miss_rate", "false_alarm_rate")
CLOSED_FIELDS = ("episodes", "success", "wasted_calls", "wasted_spend", "false_interventions")


@dataclass
class RunData:
    """One or more run folders, loaded and pooled."""

    dirs: list[Path]
    manifests: list[dict[str, Any]]
    units: dict[str, ScoringUnits]
    calls: pd.DataFrame
    outcomes: pd.DataFrame
    timings: pd.DataFrame
    closed: pd.DataFrame
    closed_metrics: pd.DataFrame
    metrics: pd.DataFrame
    detectors: list[str]
    specs: dict[str, tuple[str, dict[str, Any]]]
    delta: int
    notes: list[str] = field(default_factory=list)

    @property
    def pooled(self) -> bool:
        return len(self.dirs) > 1


def load_runs(dirs: Sequence[str | Path]) -> RunData:
    """Read run folders; raises ``FileNotFoundError`` naming a folder without a manifest."""
    dirs = [Path(d) for d in dirs]
    manifests, calls, outcomes, timings, closed, closed_m, metrics = [], [], [], [], [], [], []
    units: dict[str, ScoringUnits] = {}
    notes: list[str] = []
    specs: dict[str, tuple[str, dict[str, Any]]] = {}
    deltas = set()
    for i, d in enumerate(dirs):
        if not (d / "manifest.json").is_file():
            raise FileNotFoundError(f"{d}: not a run folder (no manifest.json)")
        man = read_run_manifest(d)  # RunFolderError when the folder mixes runs
        manifests.append(man)
        deltas.add(int(man.get("config", {}).get("delta", DELTA)))
        prefix = f"r{i}:" if len(dirs) > 1 else ""
        # Each detector as it ran: the parameters given, then every value it resolved them to,
        # so a default changed since the run does not change what its report re-derives.
        ran = {r["label"]: r.get("params") or {} for r in man.get("detectors", []) if isinstance(r, dict) and "label" in r}
        for det in man.get("config", {}).get("detectors", []):
            specs.setdefault(det["label"], (det["spec"], {**(det.get("params") or {}), **ran.get(det["label"], {})}))
        trace = d / "trace.jsonl"
        # a replay names the trace files it read in its configuration
        sources = [Path(s) for s in man.get("config", {}).get("sources", [])] if not trace.exists() else [trace]
        for src in sources:
            if src.exists() and src.suffix in (".jsonl", ".json"):
                units.update(trace_units(src, prefix))
        if not units:
            notes.append(f"{d}: no trace to re-score from; threshold sweeps and the Δ view are left out")
        for name, acc in (("calls.csv", calls), ("episodes.csv", outcomes), ("timings.csv", timings),
                          ("closed.csv", closed), ("closed_metrics.csv", closed_m), ("metrics.csv", metrics)):
            df = read_table(d / name)
            if len(df):
                if "episode" in df:
                    df["episode"] = prefix + df["episode"].astype(str)
                df["run"] = i
                acc.append(df)
    if len(deltas) > 1:
        notes.append(f"the pooled runs used different windows Δ {sorted(deltas)}; the first is used")

    def cat(frames):
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    out, calls_df = cat(outcomes), cat(calls)
    dets = list(dict.fromkeys(out["detector"])) if len(out) else list(dict.fromkeys(cat(closed_m).get("detector", [])))
    if len(dirs) > 1 and len(out):
        # Pool only detectors every run scored, or their numbers would cover different episodes.
        common = [d for d in dets if all(d in set(f["detector"]) for f in outcomes)]
        dropped = [d for d in dets if d not in common]
        if dropped:
            notes.append(f"left out of the pooled open-loop tables (not in every run): {', '.join(dropped)}")
        dets = common
        out = out[out["detector"].isin(dets)].reset_index(drop=True)
        calls_df = calls_df[calls_df["detector"].isin(dets)].reset_index(drop=True) if len(calls_df) else calls_df
        if len(closed) not in (0, len(dirs)):
            notes.append(f"closed-loop tables come from the {len(closed)} of {len(dirs)} runs that ran closed loop")
    return RunData(dirs, manifests, units, calls_df, out, cat(timings), cat(closed), cat(closed_m), cat(metrics),
                   dets, specs, next(iter(sorted(deltas))) if deltas else DELTA, notes)


def outcome_objects(df: pd.DataFrame) -> list[Outcome]:
    res = []
    for r in df.itertuples(index=False):
        res.append(Outcome(r.episode, r.family, str(r.unit), r.outcome,
                           None if pd.isna(r.onset) else int(r.onset),
                           None if pd.isna(r.first_alarm) else int(r.first_alarm),
                           None if pd.isna(r.delay) else int(r.delay), bool(r.late) if not pd.isna(r.late) else False,
                           None if pd.isna(r.error) or r.error == "" else str(r.error),
                           **_severity_fields(r)))
    return res


def _severity_fields(r) -> dict:
    """A row's run outcome and loop severity, where its ``episodes.csv`` has them (older runs do not)."""
    out = {}
    run = getattr(r, "run_outcome", None)
    if isinstance(run, str) and run:
        out["run_outcome"] = run
    sev = getattr(r, "severity", None)
    if isinstance(sev, str) and sev:
        out["severity"] = sev
    return out


def label_loop(series: pd.Series) -> list:
    return [as_bool(v) for v in series.tolist()]


@dataclass
class Analysis:
    data: RunData
    profiles_version: str
    profiles: dict[str, dict[str, float]]
    rounds: int
    seed: int
    intervals: list[dict] = field(default_factory=list)
    paired: list[dict] = field(default_factory=list)
    thresholds: list[dict] = field(default_factory=list)
    curves: list[dict] = field(default_factory=list)  # per detector and value: far, miss, median delay, score
    delta_rows: list[dict] = field(default_factory=list)
    closed_intervals: list[dict] = field(default_factory=list)
    closed_paired: list[dict] = field(default_factory=list)
    delays: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    #: The open-loop rows as the bootstrap reads them, kept with the sweeps (None: not kept, or the
    #: run has no open-loop outcomes).
    open_loop: OpenLoopData | None = None
    #: Each detector's threshold sweep, without its outcomes, when ``analyse`` was asked to keep them.
    swept: dict[str, SweptTotals] = field(default_factory=dict)


@dataclass
class OpenLoopData:
    """A run's open-loop rows arranged for the bootstrap: the judged episodes (the clusters,
    ``index`` gives each its row) over their families (the strata), each detector's outcomes
    and per-call rows, and the episodes that failed."""

    boot: Bootstrap
    index: dict[str, int]
    by_det: dict[str, list[Outcome]]
    cgroups: dict[str, pd.DataFrame]
    errors: pd.DataFrame


def open_loop_data(data: RunData, rounds: int, seed: int, family_text: bool = False,
                   detectors: Sequence[str] | None = None) -> OpenLoopData:
    """:class:`OpenLoopData` of ``data`` (its outcomes non-empty), for ``detectors`` (default: all);
    ``family_text`` reads every family as text (a numeric corpus name stays a name)."""
    out, calls = data.outcomes, data.calls
    ep_family = dict(zip(out["episode"], out["family"].astype(str) if family_text else out["family"]))
    keys = sorted(ep_family)
    return OpenLoopData(
        boot=Bootstrap(keys, [ep_family[k] for k in keys], rounds=rounds, seed=seed),
        index={k: i for i, k in enumerate(keys)},
        by_det={d: outcome_objects(out[out["detector"] == d]) for d in (data.detectors if detectors is None else detectors)},
        cgroups={d: g for d, g in calls.groupby("detector", sort=False)} if len(calls) else {},
        errors=out[out["error"].notna() & (out["error"] != "")])


def _closed_metrics(t: np.ndarray, profiles=None) -> dict[str, np.ndarray]:
    g = {f: t[..., i] for i, f in enumerate(CLOSED_FIELDS)}
    n = np.where(g["episodes"] > 0, g["episodes"], np.nan)
    return {"success_rate": g["success"] / n, "wasted_calls_per_episode": g["wasted_calls"] / n,
            "wasted_spend_per_episode": g["wasted_spend"] / n,
            "false_interventions_per_episode": g["false_interventions"] / n}


def analyse(data: RunData, *, rounds: int = 1000, seed: int = 0, deltas: Sequence[int] = DELTAS,
            workers: int = 0, keep_sweeps: bool = False) -> Analysis:
    """Compute every table of the report from loaded run data.

    The parts are independent: the intervals and paired differences, each detector's
    threshold sweep and its Δ view, the closed-loop intervals. They run as one list of jobs
    over forked processes (``workers``: 0 = one per core, 1 = in this process), the
    intervals (the longest) first, so no core waits while another works through a serial part.
    ``keep_sweeps`` keeps each detector's swept totals in ``Analysis.swept`` and the rows they
    come from in ``Analysis.open_loop`` (for :func:`sim.report.crossval.corpus_cv`, which
    chooses from the same sweeps per corpus).
    """

    version, profiles = load_profiles()
    an = Analysis(data, version, profiles, rounds, seed, notes=list(data.notes))
    t0 = time.perf_counter()
    work = _Work(an, deltas, keep_sweeps=keep_sweeps)
    jobs: list[tuple] = []
    out = data.outcomes
    if len(out):
        # Clusters: every judged episode of the run(s); strata: their families.
        ol = open_loop_data(data, rounds, seed)
        if keep_sweeps:  # else not held past the analysis: its per-detector call rows are a copy of calls.csv
            an.open_loop = ol
        work.by_det, work.index, work.boot, work.cgroups, work.errors = ol.by_det, ol.index, ol.boot, ol.cgroups, ol.errors
        for d in data.detectors:
            an.delays[d] = [o.delay for o in work.by_det[d] if o.outcome == "tp" and o.delay is not None]
        work.sweeps = bool(data.units and len(data.calls))
        jobs.append(("intervals", None))
        if work.sweeps:
            jobs += [("sweep", d) for d in data.detectors] + [("delta", d) for d in data.detectors]
    if len(data.closed):
        jobs.append(("closed", None))
    global _WORK
    _WORK = work
    try:
        parts = map_forked(_analysis_job, jobs, min(workers or default_workers(), len(jobs)))
    finally:
        _WORK = None
    for (kind, det), (part, seconds) in zip(jobs, parts):
        an.seconds[_SECONDS[kind]] = an.seconds.get(_SECONDS[kind], 0.0) + seconds
        if kind == "intervals":
            an.intervals, an.paired, defaults = part
            an.thresholds += defaults
        elif kind == "sweep":
            curves, rows, notes, swept = part
            an.curves += curves
            an.thresholds += rows
            an.notes += notes
            if swept is not None:
                an.swept[det] = swept
        elif kind == "delta":
            an.delta_rows += part
        else:
            an.closed_intervals, an.closed_paired = part
    an.seconds["total"] = time.perf_counter() - t0
    return an


#: ``Analysis.seconds`` key under which each kind of job adds its time (in its worker).
_SECONDS = {"intervals": "bootstrap", "sweep": "thresholds", "delta": "delta", "closed": "closed"}


@dataclass
class _Work:
    """What every analysis job reads; forked workers see it without a copy."""

    an: Analysis
    deltas: Sequence[int]
    boot: Bootstrap | None = None
    by_det: dict[str, list[Outcome]] = field(default_factory=dict)
    cgroups: dict[str, pd.DataFrame] = field(default_factory=dict)
    index: dict[str, int] = field(default_factory=dict)
    errors: pd.DataFrame | None = None
    sweeps: bool = False
    keep_sweeps: bool = False


_WORK: _Work | None = None  # set in the parent before its workers fork


def _analysis_job(kind: str, det: str | None) -> tuple[Any, float]:
    """One job of :func:`analyse`, with the seconds it took."""
    t0 = time.perf_counter()
    w = _WORK
    if kind == "intervals":
        part = _intervals(w)
    elif kind == "sweep":
        part = _sweep_one(w, det)
    elif kind == "delta":
        part = _delta_rows(w.an, w.cgroups.get(det), w.errors, det, w.deltas)
    else:
        part = _closed_intervals(w.an)
    return part, time.perf_counter() - t0


def _intervals(w: _Work) -> tuple[list, list, list]:
    """The open-loop intervals and paired differences, and each detector's default row when
    there are no sweeps (no stored trace to re-score from)."""
    an, data, boot = w.an, w.an.data, w.boot
    totals = {}
    for d in data.detectors:
        adv = None
        if d in w.cgroups and data.units:
            g = w.cgroups[d]
            adv = advisory_counts(data.units, g["node"].tolist(), g["episode"].tolist(), label_loop(g["label_loop"]),
                                  (g["verdict"] != "allow").tolist())
        totals[d] = episode_totals(w.by_det[d], w.index, data.delta, adv)
    intervals = boot.intervals(totals, an.profiles)
    paired = boot.paired(totals, an.profiles, PAIRED_METRICS)
    defaults: list[dict] = []
    if not w.sweeps:
        for d in data.detectors:
            defaults.append(_default_row(an, d, w.by_det[d], boot, totals[d], note="no stored trace"))
    return intervals, paired, defaults


def _closed_intervals(an: Analysis) -> tuple[list, list]:
    """The closed-loop intervals and paired differences."""
    c = an.data.closed
    fam = dict(zip(c["episode"], c["family"]))
    keys = sorted(fam)
    index = {k: i for i, k in enumerate(keys)}
    boot = Bootstrap(keys, [fam[k] for k in keys], rounds=an.rounds, seed=an.seed)
    ctot = {}
    for d, g in c.groupby("detector", sort=False):
        x = np.zeros((len(keys), len(CLOSED_FIELDS)))
        rows = np.array([index[e] for e in g["episode"]])
        success = g["success"].map(lambda v: as_bool(v) is True).astype(float).to_numpy()
        for j, col in enumerate(CLOSED_FIELDS):
            vals = np.ones(len(g)) if col == "episodes" else success if col == "success" else g[col].astype(float).to_numpy()
            np.add.at(x[:, j], rows, vals)
        ctot[d] = x
    return (boot.intervals(ctot, an.profiles, metrics_fn=_closed_metrics),
            boot.paired(ctot, an.profiles, ("success_rate", "wasted_spend_per_episode"), metrics_fn=_closed_metrics))


def _row(detector: str, kind: str, value, outs: list[Outcome], profiles, delta, boot_score=None, boot_far=None,
         boot_miss=None, note: str = "") -> dict:
    s = summarize(outs, delta)
    row = {"detector": detector, "kind": kind, "value": value, "far": s["false_alarm_rate"], "miss_rate": s["miss_rate"],
           "median_delay": s["median_delay"], "score_standard": composite(outs, profiles["standard"], delta)
           if any(o.outcome != "unlabelled" for o in outs) else None, "note": note}
    for name, arr in (("far", boot_far), ("miss", boot_miss), ("score", boot_score)):
        if arr is not None:
            lo, hi = percentile_interval(arr)
            row[f"{name}_lo"], row[f"{name}_hi"] = float(lo), float(hi)
    return row


def _default_row(an: Analysis, det: str, outs, boot: Bootstrap, x: np.ndarray, note: str = "") -> dict:
    """``det``'s threshold-table row at its defaults alone."""
    _, rt = boot.totals(x)
    rm = metrics_from_totals(rt, an.profiles)
    return _row(det, "default", None, outs, an.profiles, an.data.delta, rm["score_standard"], rm["false_alarm_rate"],
                rm["miss_rate"], note=note)


def _sweep_one(w: _Work, det: str) -> tuple[list, list, list, SweptTotals | None]:
    """One detector's sweep: the curve rows, threshold rows and notes it adds, collected in
    lists of its own (the analysis is shared when the jobs run in this process), and with
    ``keep_sweeps`` its swept totals without the outcomes (only the totals go back from a worker)."""
    an = w.an
    kept = an.curves, an.thresholds, an.notes
    an.curves, an.thresholds, an.notes = [], [], []
    try:
        st = _sweep_detector(an, w.boot, w.cgroups, w.by_det, w.index, an.data.delta, w.errors, det)
        return an.curves, an.thresholds, an.notes, replace(st, outs=[]) if w.keep_sweeps else None
    finally:
        an.curves, an.thresholds, an.notes = kept


@dataclass
class SweptTotals:
    """One detector's outcomes at every candidate value of its threshold, as totals per family.

    ``point`` is ``(F, V, k)`` and ``rounds`` ``(R, F, V, k)`` (families in the bootstrap's
    order, k = :data:`sim.scoring.uncertainty.FIELDS`). A detector that cannot be swept has
    one value (``None``, as run) and ``param`` None; ``reason`` says why.
    """

    param: str | None
    values: list
    default_index: int
    outs: list[list[Outcome]]
    point: np.ndarray
    rounds: np.ndarray
    reason: str = ""
    note: str = ""  # for the report's notes, when the detector could not be swept for a fault of its own


def swept_totals(data: RunData, boot: Bootstrap, cgroups, by_det, index, errors_all, det: str) -> SweptTotals:
    """``det``'s threshold sweep from its stored per-call scores (or its outcomes as run, when
    it has no threshold parameter, cannot be rebuilt or its scores break the sweep contract)."""
    delta = data.delta

    def as_run(reason: str, note: str = "") -> SweptTotals:
        x = episode_totals(by_det[det], index, delta)[:, None, :]  # (N, 1, k)
        point, rounds = boot.family_totals(x)
        return SweptTotals(None, [None], 0, [by_det[det]], point, rounds, reason, note)

    try:
        detector = DetectorSpec(det, *data.specs[det]).build() if det in data.specs else None
    except Exception as exc:  # noqa: BLE001 — a plug-in that no longer builds: default only
        return as_run("no threshold parameter", f"{det}: cannot rebuild ({type(exc).__name__}); shown at its default only")
    param = getattr(detector, "threshold_param", None) if detector is not None else None
    if param is None or det not in cgroups:
        return as_run("no threshold parameter")
    default = getattr(detector, param)
    cs = CallScores.from_rows(cgroups[det])
    bad, total = check_contract(detector, cs, default)
    if bad:
        return as_run("sweep contract broken",
                      f"{det}: {bad} of {total} stored verdicts disagree with score >= threshold_for(tool, "
                      f"{param}); its scores cannot be swept, so it is shown at its default only")
    values = candidate_values(detector, cs, default)
    errs = {r.episode: str(r.error) for r in errors_all[errors_all["detector"] == det].itertuples()}
    outs = sweep(data.units, cs, detector, values, delta, errs)
    x = np.stack([episode_totals(o, index, delta) for o in outs])  # (V, N, k)
    point, rounds = boot.family_totals(np.moveaxis(x, 0, 1))  # (F, V, k), (R, F, V, k)
    return SweptTotals(param, values, values.index(default), outs, point, rounds)


def _sweep_detector(an: Analysis, boot: Bootstrap, cgroups, by_det, index, delta, errors_all, det: str) -> SweptTotals:
    """``det``'s threshold curve and operating points (or its default row, when it has no
    threshold parameter or its stored scores break the sweep contract), added to ``an``;
    the sweep they come from."""
    profiles = an.profiles
    std = profiles["standard"]
    fams = list(boot.groups)
    st = swept_totals(an.data, boot, cgroups, by_det, index, errors_all, det)
    if st.note:
        an.notes.append(st.note)
    if st.param is None:
        x_default = episode_totals(by_det[det], index, delta)
        an.thresholds.append(_default_row(an, det, by_det[det], boot, x_default, note=st.reason))
        return st
    param, values, outs, d_idx = st.param, st.values, st.outs, st.default_index
    default = values[d_idx]
    pf_point, pf_round = st.point, st.rounds
    pt, rt = pf_point.sum(0), pf_round.sum(1)  # (V, k), (R, V, k)
    pm, rm = metrics_from_totals(pt, profiles), metrics_from_totals(rt, profiles)
    for v, row in zip(values, sweep_metrics(values, outs, {"standard": std}, delta)):
        an.curves.append({"detector": det, "param": param, "value": v, "far": row["false_alarm_rate"],
                          "miss_rate": row["miss_rate"], "median_delay": row["median_delay"],
                          "score_standard": row["score_standard"], "default": v == default})

    def at(kind, i_point, i_round, note=""):
        rr = take(rt, i_round)
        m = metrics_from_totals(rr, profiles)
        an.thresholds.append(_row(det, kind, values[int(i_point)], outs[int(i_point)], profiles, delta,
                                  m["score_standard"], m["false_alarm_rate"], m["miss_rate"], note=note))

    at("default", d_idx, np.full(an.rounds, d_idx), f"{param} as run")
    for target in FAR_TARGETS:
        ip = pick_calibrated(pm["false_alarm_rate"], pm["miss_rate"], pm["score_standard"], target, d_idx)
        ir = pick_calibrated(rm["false_alarm_rate"], rm["miss_rate"], rm["score_standard"], target, d_idx)
        met = pm["false_alarm_rate"][ip] <= target + 1e-12
        at(f"calibrated@{target * 100:g}%", ip, ir,
           "FAR target met on the clean episodes" if met else "no value meets the FAR target; lowest FAR")
    score_fn = lambda t: score_from_totals(t, std)  # noqa: E731
    held_pt, pick_pt = heldout_totals(pf_point, score_fn, d_idx)
    held_rt, _ = heldout_totals(pf_round, score_fn, d_idx)
    held_outs = []
    fam_of = {k: f for f, idx in boot.groups.items() for k in np.asarray(boot.keys)[idx]}
    for fi, f in enumerate(fams):
        held_outs += [o for o in outs[int(pick_pt[fi])] if fam_of.get(o.episode) == f]
    chosen = [values[int(i)] for i in pick_pt]
    mode = statistics.mode(chosen)
    hm = metrics_from_totals(held_rt, profiles)
    row = _row(det, "calibrated_heldout", mode, held_outs, profiles, delta, hm["score_standard"],
               hm["false_alarm_rate"], hm["miss_rate"],
               note="leave-one-family-out; values picked: " + ", ".join(
                   f"{_fmt_value(v)}×{chosen.count(v)}" for v in sorted(set(chosen))))
    an.thresholds.append(row)
    ip = pick_best(pm["score_standard"], d_idx)
    ir = pick_best(rm["score_standard"], d_idx)
    at("oracle", ip, ir, "best on the scored episodes: an upper bound")
    return st


def _fmt_value(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _delta_rows(an: Analysis, g: pd.DataFrame | None, errors: pd.DataFrame, det: str,
                deltas: Sequence[int]) -> list[dict]:
    """``det``'s outcomes at other windows Δ, re-scored from its stored per-call verdicts ``g``."""
    alarms: dict[str, dict[str, bool]] = {}
    if g is not None:
        for e, n, v in zip(g["episode"].tolist(), g["node"].tolist(), (g["verdict"] != "allow").tolist()):
            alarms.setdefault(e, {})[n] = v
    errs = {r.episode: str(r.error) for r in errors[errors["detector"] == det].itertuples()}
    # Where each unit first alarmed does not depend on Δ: found once, classified per Δ.
    firsts = [(u, u.first_alarms(alarms.get(eid, {})), errs.get(eid)) for eid, u in an.data.units.items()]
    rows = []
    for dl in deltas:
        outs: list[Outcome] = []
        for u, first, err in firsts:
            outs += u.outcomes_at(first, dl, err)
        s = summarize(outs, dl)
        row = {"detector": det, "delta": dl, "tp": s["tp"], "miss": s["miss"], "early": s["early"],
               "late": s["late"], "miss_rate": s["miss_rate"], "median_delay": s["median_delay"]}
        for name, w in an.profiles.items():
            row[f"score_{name}"] = composite(outs, w, dl)
        rows.append(row)
    return rows
