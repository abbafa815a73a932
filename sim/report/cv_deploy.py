"""Leave-one-corpus-out in a deployer's terms: every deployment figure, dev and held out.

:mod:`sim.report.crossval` says how a detector scores on a corpus nobody tuned it on. A
deployer decides in other units — how many good runs a halt stops, how much of a failed run's
spend it saves, how often the agent is nudged for nothing — so this module computes every
``deploy.csv`` figure (:mod:`sim.scoring.deploy`) twice, from the same run:

- **dev**: each detector as run (``deploy.csv``'s own figures: the values it shipped with,
  which were derived with these very corpora in view);
- **held out**: each corpus's calls alarmed by the detector as leave-one-corpus-out scored it
  on that corpus (:attr:`sim.report.crossval.CrossVal.picks`): its threshold chosen on the
  other corpora (alarms from the stored per-call scores, as the threshold sweep computes
  them), or its variant without the rules written from that corpus (the re-simulated
  verdicts of :func:`sim.tuning.loco.unseen_grids`); the corpora's held-out alarms are then
  pooled.

"As configured" held out: a rules variant's own stop / escalate verdicts; a threshold
detector's alarms halt as configured when every alarm it stored halts (none when none does);
otherwise the figure is left empty with a note. A default chosen per fold by ``--cv-param``: the
re-simulated verdicts of the cell each corpus was scored at (of the variant without the corpus's
rules, when those are held out too); a threshold in that grid alarms as above.

Intervals: the deployment view's bootstrap (episodes resampled within each corpus, the same
rounds for dev and held out), so the change held out − dev is paired.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from sim.numbers import as_float
from sim.report.crossval import POOLED, RULES_PARAM, CrossVal, Grid
from sim.scoring.deploy import (FIELDS, METRICS, DeployRows, metric_note, metrics_from_totals, recorded,
                                run_outcomes)
from sim.scoring.thresholds import HALTING_VERDICTS
from sim.scoring.uncertainty import Bootstrap, percentile_interval

CV_DEPLOY_COLUMNS = ["detector", "corpus", "action", "metric", "heldout_as", "dev", "dev_lo", "dev_hi", "dev_count",
                     "dev_of", "heldout", "heldout_lo", "heldout_hi", "heldout_count", "heldout_of", "change",
                     "change_lo", "change_hi", "note"]
#: What the report's table and the CLI show, in this order: (action, metric, heading, scale text).
SHOWN = (("halt", "successes_stopped", "successful runs stopped, halting at the first alarm", "%"),
         ("configured", "successes_stopped", "successful runs stopped, as configured", "%"),
         ("halt", "failed_calls_saved", "failed-run calls saved, halting at the first alarm", "%"),
         ("configured", "failed_calls_saved", "failed-run calls saved, as configured", "%"),
         ("halt", "loops_caught", "loops caught (halting, within Δ)", "%"),
         ("nudge", "nudges_per_100_clean", "nudges per 100 clean calls", ""))
_F = {f: i for i, f in enumerate(FIELDS)}


class _Alarms:
    """One detector's held-out alarms and halts over its ``calls.csv`` rows, filled corpus by corpus."""

    def __init__(self, calls: pd.DataFrame):
        self.calls = calls
        self.alarm = (calls["verdict"].astype(str) != "allow").to_numpy().copy()
        self.halt = calls["verdict"].astype(str).isin(HALTING_VERDICTS).to_numpy().copy()
        self.family = calls["family"].astype(str).to_numpy()
        self.row = {(e, n): i for i, (e, n) in enumerate(zip(calls["episode"].astype(str), calls["node"].astype(str)))}
        self.configured_known = True

    def from_verdicts(self, corpus: str, cs) -> None:
        """Corpus ``corpus``'s calls get the verdicts of a re-simulation (``CallScores``)."""
        mask = self.family == corpus
        self.alarm[mask] = False
        self.halt[mask] = False
        if not cs.halt_known:
            self.configured_known = False
        for eid, (nodes, _, _) in cs.by_episode.items():
            for j, node in enumerate(nodes):
                i = self.row.get((eid, str(node)))
                if i is not None and mask[i]:
                    self.alarm[i] = bool(cs.verdict_alarm[eid][j])
                    self.halt[i] = bool(cs.verdict_halt[eid][j]) if eid in cs.verdict_halt else False

    def from_threshold(self, corpus: str, threshold_for: Callable[[str, float], float], value: float,
                       halts: bool | None) -> None:
        """Corpus ``corpus``'s calls alarm iff their stored score reaches ``threshold_for(tool, value)``."""
        mask = self.family == corpus
        sub = self.calls[mask]
        scores = pd.to_numeric(sub["score"], errors="coerce").fillna(-np.inf).to_numpy()
        cache: dict[str, float] = {}
        th = np.array([cache[t] if t in cache else cache.setdefault(t, float(threshold_for(t, value)))
                       for t in sub["tool"].astype(str)], dtype=float)
        self.alarm[mask] = scores >= th
        if halts is None:
            self.configured_known = False
        self.halt[mask] = self.alarm[mask] if halts else False


def _halts_with_alarms(calls: pd.DataFrame) -> bool | None:
    """Whether the detector's stored alarms halt as configured: all of them (True), none (False),
    or some (None: which ones would at another threshold cannot be told from the scores)."""
    v = calls["verdict"].astype(str)
    alarms = v[v != "allow"]
    if not len(alarms):
        return False
    halting = alarms.isin(HALTING_VERDICTS)
    return True if halting.all() else (False if not halting.any() else None)


_UNKNOWN_HALTS = ("{det}: some of its stored alarms halt and some do not, so which would halt at another threshold "
                  "is unknown: its held-out 'as configured' figures are left empty")


def heldout_alarms(det: str, calls: pd.DataFrame, cv: CrossVal, grids: Mapping[str, Grid] | None,
                   build: Callable[[str], Any]) -> tuple[_Alarms, str, str]:
    """``det``'s held-out alarms over its ``calls.csv`` rows; what it was held out as; a note."""
    al = _Alarms(calls)
    param, values, picks = cv.picks.get(det, (None, [None], [0] * len(cv.corpora)))
    grid = (grids or {}).get(det)
    if param is None:
        return al, "as run", ""
    described = []
    if grid is not None:
        for corpus, cell in zip(cv.corpora, picks):
            # a variant without the corpus's rules (``--cv-param`` with ``--cv-rules``) was chosen,
            # and is scored, on its own re-simulation
            cs = (grid.fold_calls[corpus] if grid.fold_calls is not None else grid.calls)[cell]
            if cs is not None:  # None: the run's own cell, its stored verdicts
                al.from_verdicts(corpus, cs)
            described.append(f"{corpus}: {values[cell]}" if grid.param == RULES_PARAM
                              else f"{corpus}: {grid.param}={values[cell]}")
        note = "" if al.configured_known else _UNKNOWN_HALTS.format(det=det)
        return al, "; ".join(described), note
    detector = build(det)
    halts = _halts_with_alarms(calls)
    for corpus, cell in zip(cv.corpora, picks):
        al.from_threshold(corpus, detector.threshold_for, values[cell], halts)
        described.append(f"{corpus}: {param}={values[cell]:g}" if isinstance(values[cell], float)
                         else f"{corpus}: {param}={values[cell]}")
    note = "" if al.configured_known else _UNKNOWN_HALTS.format(det=det)
    return al, "; ".join(described), note


def heldout_deploy(data, cv: CrossVal, grids: Mapping[str, Grid] | None, build: Callable[[str], Any], *,
                   rounds: int, seed: int, detectors: Sequence[str] | None = None) -> tuple[list[dict], list[str]]:
    """Rows of :data:`CV_DEPLOY_COLUMNS` for every detector of ``cv`` (or ``detectors``), per
    corpus and pooled, and notes. ``data``: the run (``sim.report.analysis.RunData``) ``cv`` was
    computed from; ``build(det)`` rebuilds a detector for its ``threshold_for``."""
    units_all, calls_all = data.outcomes, data.calls
    if not len(units_all) or not len(calls_all):
        return [], []
    outcomes = run_outcomes(units_all, data.closed)
    has_sev, has_tok = recorded(units_all, calls_all)
    ep_fam = dict(zip(units_all["episode"].astype(str), units_all["family"].astype(str)))
    keys = {e: i for i, e in enumerate(ep_fam)}
    boot = Bootstrap(list(keys), [ep_fam[e] for e in keys], rounds=rounds, seed=seed)
    assert list(boot.groups) == list(cv.corpora)
    rows: list[dict] = []
    notes: list[str] = []
    names = list(cv.corpora) + [POOLED]
    for det in detectors or cv.detectors():
        units = units_all[units_all["detector"] == det]
        calls = calls_all[calls_all["detector"] == det]
        if not len(units) or not len(calls):
            continue
        al, held_as, note = heldout_alarms(det, calls, cv, grids, build)
        if note:
            notes.append(note)
        dr = DeployRows(units, calls, outcomes.by_episode, keys)
        stored_halt = calls["verdict"].astype(str).isin(HALTING_VERDICTS).to_numpy()
        totals = {("dev", "halt"): dr.totals(), ("dev", "configured"): dr.alarm_totals(stored_halt, data.delta),
                  ("heldout", "halt"): dr.alarm_totals(al.alarm, data.delta),
                  ("heldout", "configured"): dr.alarm_totals(al.halt, data.delta)}
        if held_as == "as run":  # the very alarms of dev: the same figures, not a recount
            totals[("heldout", "halt")], totals[("heldout", "configured")] = totals[("dev", "halt")], totals[("dev", "configured")]
        totals[("dev", "nudge")], totals[("heldout", "nudge")] = totals[("dev", "halt")], totals[("heldout", "halt")]
        per = {}
        for k, x in totals.items():
            fp, fr = boot.family_totals(x)  # (C, k), (R, C, k)
            point = np.concatenate([fp, fp.sum(axis=0, keepdims=True)])
            rnd = np.concatenate([fr, fr.sum(axis=1, keepdims=True)], axis=1)
            per[k] = (point, metrics_from_totals(point), metrics_from_totals(rnd))
        for action, metric, num, den, _ in METRICS:
            for act in (("halt", "configured") if action == "halt" else (action,)):
                dev_p, dev_m, dev_r = per[("dev", act)]
                ho_p, ho_m, ho_r = per[("heldout", act)]
                for ci, corpus in enumerate(names):
                    known_ho = act != "configured" or al.configured_known
                    why = metric_note(metric, outcomes, has_sev, has_tok, dev_p[ci, _F[den]])
                    row = {"detector": det, "corpus": corpus, "action": act, "metric": metric, "heldout_as": held_as,
                           "note": why or ("" if known_ho else "which alarms halt at the held-out threshold is unknown")}
                    for side, p, m, r, known in (("dev", dev_p, dev_m, dev_r, not why),
                                                 ("heldout", ho_p, ho_m, ho_r, known_ho and not why)):
                        d = p[ci, _F[den]]
                        ok = known and d > 0
                        lo, hi = percentile_interval(r[metric][:, ci]) if ok else (np.nan, np.nan)
                        row.update({side: as_float(m[metric][ci]) if ok else None, f"{side}_lo": as_float(lo) if ok else None,
                                    f"{side}_hi": as_float(hi) if ok else None,
                                    f"{side}_count": int(p[ci, _F[num]]) if ok else None, f"{side}_of": int(d) if ok else None})
                    if row["dev"] is not None and row["heldout"] is not None:
                        lo, hi = percentile_interval(ho_r[metric][:, ci] - dev_r[metric][:, ci])
                        row.update(change=as_float(ho_m[metric][ci] - dev_m[metric][ci]), change_lo=as_float(lo),
                                   change_hi=as_float(hi))
                    else:
                        row.update(change=None, change_lo=None, change_hi=None)
                    rows.append(row)
    return rows, notes


def _get(rows: Sequence[dict], det: str, corpus: str, action: str, metric: str) -> dict | None:
    return next((r for r in rows if (r["detector"], r["corpus"], r["action"], r["metric"]) == (det, corpus, action, metric)), None)


def cell_text(r: dict | None, side: str, scale: str) -> str:
    """``3/53 (5.7 %)`` for a share, ``3.1`` for a rate per 100 calls; ``–`` when not measured."""
    if r is None or r[side] is None:
        return "–"
    if scale == "%":
        return f"{r[side + '_count']}/{r[side + '_of']} ({100 * r[side]:.1f} %)"
    return f"{r[side]:.1f}"


def verdict_text(rows: Sequence[dict], det: str) -> str:
    """One sentence: should ``det`` nudge first or halt at its first alarm, held out (pooled)."""
    halt_s, conf_s = _get(rows, det, POOLED, "halt", "successes_stopped"), _get(rows, det, POOLED, "configured", "successes_stopped")
    halt_c, conf_c = _get(rows, det, POOLED, "halt", "failed_calls_saved"), _get(rows, det, POOLED, "configured", "failed_calls_saved")
    nudges = _get(rows, det, POOLED, "nudge", "nudges_per_100_clean")
    if any(r is None or r["heldout"] is None for r in (halt_s, halt_c)):
        return ""
    text = (f"Held out, `{det}` halting at its first alarm stops {cell_text(halt_s, 'heldout', '%')} of the successful "
            f"runs (dev {cell_text(halt_s, 'dev', '%')}) and saves {100 * halt_c['heldout']:.1f} % of the failed runs' "
            f"calls (dev {100 * halt_c['dev']:.1f} %)")
    if conf_s is not None and conf_s["heldout"] is not None and conf_c is not None and conf_c["heldout"] is not None:
        if conf_c["heldout"] == 0 and conf_s["heldout"] == 0 and halt_c["heldout"] > 0:
            text += "; as configured it never halts (its alarms nudge or refuse a call)"
        else:
            text += (f"; as configured it stops {cell_text(conf_s, 'heldout', '%')} and saves "
                     f"{100 * conf_c['heldout']:.1f} %")
    if nudges is not None and nudges["heldout"] is not None:
        text += f", at {nudges['heldout']:.1f} nudges per 100 clean calls (dev {nudges['dev']:.1f})"
    text += "."
    if (conf_s is not None and conf_s["heldout"] is not None and conf_c is not None and conf_c["heldout"] is not None
            and (conf_s["heldout"], conf_c["heldout"]) != (halt_s["heldout"], halt_c["heldout"])):
        # The trade a deployer makes, in their units: runs kept against spend given up.
        kept = halt_s["heldout_count"] - conf_s["heldout_count"]
        text += (f" Nudging first instead of halting at once: {kept} fewer successful run{'s' if kept != 1 else ''} "
                 f"stopped, {100 * (halt_c['heldout'] - conf_c['heldout']):.1f} points fewer of the failed runs' calls "
                 "saved (held out).")
    return text


def cv_deploy_text(rows: Sequence[dict], detectors: Sequence[str]) -> str:
    """The pooled figures of ``detectors`` as a compact plain-text table, dev -> held out."""
    def runs(r: dict | None) -> str:
        if r is None or r["dev"] is None or r["heldout"] is None:
            return "–"
        return f"{r['dev_count']} -> {r['heldout_count']} of {r['heldout_of']}"

    def rate(r: dict | None, scale: float, unit: str) -> str:
        if r is None or r["dev"] is None or r["heldout"] is None:
            return "–"
        return f"{scale * r['dev']:.1f} -> {scale * r['heldout']:.1f}{unit}"

    cols = (("successes stopped, halting", lambda d: runs(_get(rows, d, POOLED, "halt", "successes_stopped"))),
            ("as configured", lambda d: runs(_get(rows, d, POOLED, "configured", "successes_stopped"))),
            ("failed-run calls saved, halting", lambda d: rate(_get(rows, d, POOLED, "halt", "failed_calls_saved"), 100, " %")),
            ("nudges / 100 clean calls", lambda d: rate(_get(rows, d, POOLED, "nudge", "nudges_per_100_clean"), 1, "")))
    table = [["detector"] + [h for h, _ in cols]] + [[d] + [f(d) for _, f in cols] for d in detectors]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["Leave-one-corpus-out in a deployer's terms, pooled, as run -> held out (cv_deploy.csv has every figure):"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    return "\n".join(lines)


#: How many detectors (best held-out score first) the report's and the CLI's tables show; the CSV has all.
SHOWN_DETECTORS = 6
#: How many of those the per-corpus table shows: the best held out, those whose own verdicts
#: halt (a guard that nudges first), the reference.
CORPUS_DETECTORS = 4


def shown_detectors(cv: CrossVal, n: int = SHOWN_DETECTORS) -> list[str]:
    """The ``n`` best held-out detectors, then the reference (``exact``) when it is not among them."""
    top = cv.detectors()[:n]
    return top + [cv.reference] if cv.reference and cv.reference not in top else top


def _pair(r: dict | None, scale: str) -> str:
    if r is None:
        return "–"
    return f"{cell_text(r, 'dev', scale)} → {cell_text(r, 'heldout', scale)}"


def cv_deploy_section(doc, cv: CrossVal, rows: Sequence[dict]) -> None:
    """The report's subsection: the pooled deployment figures dev → held out, a sentence per
    guard that nudges first, and each corpus for the best few."""
    dets = shown_detectors(cv)
    doc.h(3, "In a deployer's terms: dev and held out")
    doc.p("The deployment figures (`deploy.csv`) of each detector twice: **dev**, as run on these traces at the "
          "values it shipped with; **held out**, each corpus's calls alarmed by the detector as leave-one-corpus-out "
          "scored it there (its threshold chosen on the other corpora, or without the rules written from that corpus), "
          "pooled. **Halting** stops a run at the first alarm; **as configured** only at the detector's own stop / "
          "escalate verdicts (nudges and refused calls let the run go on). Every figure, per corpus, with intervals "
          "and the paired change held out − dev, is in `cv_deploy.csv`. Best held-out score first, with "
          f"`{cv.reference}` for reference.")
    # The question "nudge first, or halt?" is only open for a detector whose own verdicts halt.
    halting = [d for d in dets if any(r["detector"] == d and r["action"] == "configured" and (r["heldout_count"] or r["dev_count"])
                                      for r in rows)]
    for d in halting:
        if (text := verdict_text(rows, d)):
            doc.p(text)
    heads = [("halt", "successes_stopped", "%"), ("configured", "successes_stopped", "%"),
             ("halt", "failed_calls_saved", "%"), ("configured", "failed_calls_saved", "%"),
             ("halt", "loops_caught", "%"), ("nudge", "nudges_per_100_clean", "")]
    doc.table(["detector (pooled, dev → held out)", "successes stopped, halting", "successes stopped, as configured",
               "failed-run calls saved, halting", "failed-run calls saved, as configured", "loops caught, halting",
               "nudges per 100 clean calls"],
              [[f"`{d}`"] + [_pair(_get(rows, d, POOLED, a, m), s) for a, m, s in heads] for d in dets])
    body = []
    per_corpus = list(dict.fromkeys(dets[:1] + halting + ([cv.reference] if cv.reference else [])))[:CORPUS_DETECTORS]
    for corpus in cv.corpora:
        for d in per_corpus:
            body.append([f"`{corpus}`", f"`{d}`"] + [_pair(_get(rows, d, corpus, a, m), s) for a, m, s in heads])
    doc.table(["corpus", "detector", "successes stopped, halting", "successes stopped, as configured",
               "failed-run calls saved, halting", "failed-run calls saved, as configured", "loops caught, halting",
               "nudges per 100 clean calls"], body)
