"""The report's deployment section (SPEC §11): ``deploy.csv``, the operating curve of every
detector's swept threshold (failed-run spend saved against successful runs stopped), and the
closed-loop figures beside the open-loop ones, with where they disagree.

Everything comes from the run folders' files (:mod:`sim.scoring.deploy`); the detector is
rebuilt only for ``threshold_for``, as the report's threshold sweep does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from sim.execute.rows import NO_GUARD
from sim.numbers import as_bool, number_text
from sim.scoring.deploy import (CURVE_METRICS, DEPLOY_COLUMNS, HALT_METRICS, LABEL_ORACLE, METRICS, deploy_rows,
                                halt_levels, operating_curve, oracle_curve, run_outcomes)
from sim.scoring.thresholds import CallScores, candidate_values

CURVE_COLUMNS = ["detector", "param", "value", "default", *CURVE_METRICS]
CLOSED_DEPLOY_COLUMNS = ["detector", "episodes", "success_rate", "success_change", "spend", "spend_saved", "stops"]
#: ``deploy_corpora.csv``: ``deploy.csv``'s rows for each corpus of a real-trace run on its own.
CORPUS_DEPLOY_COLUMNS = ["corpus", *DEPLOY_COLUMNS]
#: How many detectors (best ranked first) the report's per-corpus table shows; the CSV has all.
CORPUS_TABLE_DETECTORS = 4


@dataclass
class DeployView:
    rows: list[dict] = field(default_factory=list)  # deploy.csv
    curves: list[dict] = field(default_factory=list)  # deploy_curves.csv
    closed: list[dict] = field(default_factory=list)  # closed-loop: success and spend against no guard
    corpora: list[dict] = field(default_factory=list)  # deploy_corpora.csv: real traces, per corpus
    outcome_source: str = "none"
    notes: list[str] = field(default_factory=list)
    #: A report of several runs: each run's name, in order; its open-loop rows and curve points
    #: carry it under ``run`` (real traces and synthetic episodes are never pooled here).
    runs: list[str] = field(default_factory=list)


def _real(manifest: dict) -> bool:
    cfg = manifest.get("config", {})
    return bool(cfg.get("real")) or cfg.get("suite") == "replay"


def run_names(data) -> list[str]:
    """Each run of ``data`` as ``suite (real traces|synthetic, folder)``."""
    return [f"{m.get('config', {}).get('suite', '?')} ({'real traces' if _real(m) else 'synthetic'}, {Path(d).name})"
            for d, m in zip(data.dirs, data.manifests)]


def corpus_rows(units: pd.DataFrame, calls: pd.DataFrame, closed: pd.DataFrame, outcomes, *, rounds: int, seed: int,
                delta: int) -> list[dict]:
    """``deploy.csv``'s rows for each corpus (family) of a real-trace run on its own: a pooled
    share can hide a corpus where a halt stops many of the successful runs."""
    fams = sorted(set(units["family"].astype(str)))
    if len(fams) < 2:
        return []
    out = []
    for f in fams:
        u, c = units[units["family"].astype(str) == f], calls[calls["family"].astype(str) == f]
        out += [{"corpus": f, **r} for r in deploy_rows(u, c, closed, rounds=rounds, seed=seed, outcomes=outcomes,
                                                        delta=delta)]
    return out


def deploy_view(data, build: Callable[[str], Any], *, rounds: int, seed: int) -> DeployView:
    """The deployment view of loaded run data (``sim.report.analysis.RunData``); ``build(det)``
    rebuilds a detector for its thresholds. Several runs are viewed one by one: what a halt
    does to real runs and to synthetic ones are two answers, side by side, not one average."""
    view = DeployView()
    if len(data.outcomes) and len(data.calls):
        if data.pooled:
            view.runs = run_names(data)
            parts = [(name, data.outcomes[data.outcomes["run"] == i], data.calls[data.calls["run"] == i],
                      data.closed[data.closed["run"] == i] if len(data.closed) else data.closed)
                     for i, name in enumerate(view.runs)]
        else:
            parts = [("", data.outcomes, data.calls, data.closed)]
        sources = []
        real = [_real(m) for m in data.manifests] if data.pooled else [any(_real(m) for m in data.manifests)]
        for (name, units, calls, closed), is_real in zip(parts, real):
            if not len(units) or not len(calls):
                continue
            outcomes = run_outcomes(units, closed)
            rows = deploy_rows(units, calls, closed, rounds=rounds, seed=seed, outcomes=outcomes, delta=data.delta)
            if is_real and outcomes.known:
                view.corpora += [{"run": name, **r} if name else r for r in corpus_rows(
                    units, calls, closed, outcomes, rounds=rounds, seed=seed, delta=data.delta)]
            sources.append(f"{name}: {outcomes.source}" if name else outcomes.source)
            curves = []
            if outcomes.known:
                by = {(r["detector"], r["metric"]): r["value"] for r in rows if r["action"] != "configured"}
                for det in data.detectors:
                    # A detector without a sweepable threshold is one point: the verdicts it stored.
                    curves += _curve(units, calls, data.delta, build, det, outcomes.by_episode) or [
                        {"detector": det, "param": "", "value": None, "default": True,
                         **{m: by.get((det, m)) for m in CURVE_METRICS}}]
                det0 = str(units["detector"].iloc[0])
                if "label_loop" in calls:
                    curves += [{"detector": LABEL_ORACLE, "param": "k", "default": p["value"] == 1, **p}
                               for p in oracle_curve(units[units["detector"] == det0], calls[calls["detector"] == det0],
                                                     outcomes.by_episode, data.delta)]
            tag = {"run": name} if name else {}
            view.rows += [{**tag, **r} for r in rows]
            view.curves += [{**tag, **c} for c in curves]
        view.outcome_source = "; ".join(sources) or "none"
    view.closed = closed_view(data.closed)
    return view


def _curve(units_all, calls_all, delta: int, build, det: str, outcomes) -> list[dict]:
    try:
        detector = build(det)
    except Exception:  # noqa: BLE001 — a plug-in that no longer builds has no curve (the sweep notes it)
        return []
    param = getattr(detector, "threshold_param", None)
    calls = calls_all[calls_all["detector"] == det]
    units = units_all[units_all["detector"] == det]
    if not len(calls):
        return []
    if param is None and getattr(detector, "halt_param", None):
        # A guard that nudges first: its curve is where it halts (an alarm whose score reaches
        # halt_threshold), the points ``loopbench tune --objective deploy`` picks from.
        param = detector.halt_param
        values = halt_levels(calls)
        calls = calls.assign(score=pd.to_numeric(calls["score"], errors="coerce").where(
            calls["verdict"].astype(str) != "allow", -np.inf))
        threshold = detector.halt_threshold
    elif param is None:
        return []
    else:
        values = candidate_values(detector, CallScores.from_rows(calls), getattr(detector, param))
        threshold = detector.threshold_for
    default = getattr(detector, param)
    pts = operating_curve(units, calls, outcomes, values, threshold, delta)
    return [{"detector": det, "param": param, "default": p["value"] == default, **p} for p in pts]


def closed_view(closed: pd.DataFrame) -> list[dict]:
    """Per detector in ``closed.csv``: task success and spend, and their change against the
    unguarded reference row (``no_guard``) on the same episodes."""
    if not len(closed):
        return []
    succ = closed["success"].map(as_bool).eq(True)
    g = closed.assign(ok=succ).groupby("detector", sort=False).agg(
        episodes=("episode", "count"), success_rate=("ok", "mean"), spend=("spend", "sum"), stops=("stop", "sum"))
    ref = g.loc[NO_GUARD] if NO_GUARD in g.index else None
    out = []
    for det, r in g.iterrows():
        out.append({"detector": det, "episodes": int(r["episodes"]), "success_rate": float(r["success_rate"]),
                    "success_change": None if ref is None else float(r["success_rate"] - ref["success_rate"]),
                    "spend": float(r["spend"]),
                    "spend_saved": None if ref is None or not ref["spend"] else float(1 - r["spend"] / ref["spend"]),
                    "stops": int(r["stops"])})
    return out


def plot_operating_curve(view: DeployView, path: Path, palette: dict) -> Path | None:
    """Failed-run calls saved against successful runs stopped, one line per detector, one point per
    swept threshold; the detector's default value ringed."""
    import matplotlib.pyplot as plt

    from sim.report.plots import save

    c = pd.DataFrame(view.curves)
    if not len(c):
        return None
    c = c.dropna(subset=["successes_stopped", "failed_calls_saved"])
    if not len(c):  # no run outcome known: nothing to plot (the tables say why)
        return None
    fig, ax = plt.subplots(figsize=(7.5, 6.4))
    runs = view.runs or [""]
    if "run" not in c:
        c["run"] = ""
    for (run, det), g in c.groupby(["run", "detector"], sort=False):
        colour = "black" if det == LABEL_ORACLE else palette.get(det, "grey")
        style = ("-", "--", ":", "-.")[runs.index(run) % 4 if run in runs else 0]
        name = (det if det != LABEL_ORACLE else "label oracle: halt at the k-th labelled redundant call (k = 1…8)") \
            + (f" — {run.split(' (')[0]}" if run else "")
        order = np.argsort(g["successes_stopped"].to_numpy(), kind="stable")
        ax.plot(100 * g["successes_stopped"].to_numpy()[order], 100 * g["failed_calls_saved"].to_numpy()[order],
                style, marker="." if len(g) > 1 else "s", ms=5, lw=1.4, color=colour,
                label=name if len(g) > 1 else f"{name} (no threshold)")
        d = g[g["default"]]
        if len(d):
            ax.plot(100 * d["successes_stopped"], 100 * d["failed_calls_saved"], "o", ms=9, mfc="none", mec=colour,
                    mew=1.8)
    ax.set_xlabel("successful runs stopped by a halt (%)")
    ax.set_ylabel("calls saved on failed runs (%)")
    ax.set_xlim(-3, 103)
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.11),
              title="each point: one threshold (a guard that nudges first: one halt level); ring: as run"
                    + "".join(f"; {('solid', 'dashed', 'dotted', 'dash-dot')[i % 4]}: {r.split(' (')[0]}"
                              for i, r in enumerate(view.runs)),
              title_fontsize=7)
    ax.set_title("Operating curve: spend saved against successes stopped (halt at the first alarm, or at the\n"
                 "halt level of a guard that nudges first)", fontsize=10)
    fig.tight_layout()
    return save(fig, path)


_NUDGE = tuple(m for a, m, *_ in METRICS if a == "nudge")


def _cell(r: dict | None) -> str:
    if r is None:
        return "–"
    if r["value"] is None:
        return "n/a"
    pct = r["metric"] != "nudges_per_100_clean"
    v = f"{number_text(r['value'], 1, pct)} [{number_text(r['lo'], 1, pct)}, {number_text(r['hi'], 1, pct)}]"
    return v + (f" ({r['count']}/{r['of']})" if pct else "")


def deploy_section(doc, view: DeployView, ranked: list[str], img: Callable[[str], None]) -> None:
    """Add the deployment section to the report ``doc`` (a ``sim.report.full.Doc``; its HTML
    escapes every cell, so detector labels from a run folder cannot inject markup)."""
    if not view.rows and not view.closed:
        return
    doc.h(2, "Deployment: what a halt or a nudge does to runs")
    if view.rows:
        notes = sorted({r["note"] for r in view.rows if r["note"]})
        doc.p("Open loop, from `episodes.csv`/`calls.csv` (all in `deploy.csv`). **Halt** at the first alarm: share of "
              "successful / failed runs stopped, calls of failed runs saved (from the alarmed call on), loops and "
              "runaway loops caught within Δ. **As configured**: the same figures when only the guard's own stop / "
              "escalate verdicts end the run (its nudges and refused calls let it go on). **Nudge** at every alarm: "
              "blips and runaway loops nudged within Δ, nudges per 100 calls not labelled as loops. The **label "
              "oracle** halts where the labels put each loop's onset: a run the agent recovered in after a labelled "
              "loop is stopped by it too, so a cap on successes stopped that it misses no guard meets on these runs. "
              "95% bootstrap intervals; (count/of). Run outcomes read "
              f"from: {view.outcome_source}." + (" n/a: " + "; ".join(notes) + "." if notes else "")
              + (" Each run has its own tables (the `run` column of `deploy.csv`): real traces and synthetic "
                 "episodes are not pooled." if view.runs else ""))
        for run in view.runs or [""]:
            rows = [r for r in view.rows if r.get("run", "") == run]
            if not rows:
                continue
            if run:
                doc.h(3, f"Open loop on {run}")
            by = {(r["detector"], r["action"], r["metric"]): r for r in rows}
            dets = [d for d in ranked if any(k[0] == d for k in by)] or list(
                dict.fromkeys(r["detector"] for r in rows if r["detector"] != LABEL_ORACLE))
            halt_head = ["successes stopped", "failures stopped", "failed-run calls saved", "failed-run tokens saved",
                         "loops caught", "runaway caught"]
            oracle = [["label oracle (halts at the labelled onset)"]
                      + [_cell(by.get((LABEL_ORACLE, "halt", m))) for m in HALT_METRICS]] \
                if any(k[0] == LABEL_ORACLE for k in by) else []
            doc.table(["detector (halt at the first alarm)"] + halt_head,
                      [[f"`{d}`"] + [_cell(by.get((d, "halt", m))) for m in HALT_METRICS] for d in dets] + oracle)
            doc.table(["detector (as configured: stop / escalate halt)"] + halt_head,
                      [[f"`{d}`"] + [_cell(by.get((d, "configured", m))) for m in HALT_METRICS] for d in dets])
            doc.table(["detector (nudge)", "blips nudged", "runaway nudged", "nudges / 100 clean calls"],
                      [[f"`{d}`"] + [_cell(by.get((d, "nudge", m))) for m in _NUDGE] for d in dets])
            _corpus_table(doc, [r for r in view.corpora if r.get("run", "") == run], dets)
        if view.curves:
            img("operating_curve.png")
            doc.p("Every swept threshold of each detector is in `deploy_curves.csv`.")
        else:
            doc.p("No operating curve: the run outcome is unknown for every episode (or no detector has a threshold).")
    if view.closed:
        doc.h(3, "Closed loop: task success and spend against no guard")
        doc.p("Measured, not inferred: every scenario played with each guard in the loop and once with none "
              "(`no_guard`, the reference row). Success change and spend saved are against that row.")
        doc.table(["detector", "episodes", "task success", "success change", "spend ($)", "spend saved", "stops"],
                  [[f"`{r['detector']}`", str(r["episodes"]), number_text(r["success_rate"], 1, True),
                    number_text(r["success_change"], 1, True), number_text(r["spend"], 3),
                    number_text(r["spend_saved"], 1, True), str(r["stops"])] for r in view.closed])
        dis = disagreements(view)
        if dis:
            doc.p("Where the open-loop view and the closed loop disagree: " + " ".join(dis))
        elif view.rows:
            doc.p("The open-loop view and the closed loop agree for every detector (a halt that stops successful "
                  "runs open loop costs task success closed loop, and none that stops none does).")


def _corpus_table(doc, rows: list[dict], dets: list[str]) -> None:
    """Per corpus of real traces: the best-ranked detectors' halts, at the first alarm and as configured."""
    if not rows:
        return
    by = {(r["corpus"], r["detector"], r["action"], r["metric"]): r for r in rows}
    corpora = list(dict.fromkeys(r["corpus"] for r in rows))
    shown = dets[:CORPUS_TABLE_DETECTORS] + [LABEL_ORACLE]
    doc.p(f"Per corpus (each on its own, the {CORPUS_TABLE_DETECTORS} best-ranked detectors and the label oracle; "
          "every detector in `deploy_corpora.csv`): successful runs stopped and failed-run calls saved.")
    table = []
    for c in corpora:
        for d in shown:
            if not any(k[0] == c and k[1] == d for k in by):
                continue
            table.append([c, f"`{d}`" if d != LABEL_ORACLE else "label oracle",
                          _cell(by.get((c, d, "halt", "successes_stopped"))), _cell(by.get((c, d, "halt", "failed_calls_saved"))),
                          _cell(by.get((c, d, "configured", "successes_stopped"))),
                          _cell(by.get((c, d, "configured", "failed_calls_saved")))])
    doc.table(["corpus", "detector", "first alarm: successes stopped", "failed-run calls saved",
               "as configured: successes stopped", "failed-run calls saved"], table)


def disagreements(view: DeployView) -> list[str]:
    """Sentences naming detectors whose open-loop successes stopped and closed-loop success change
    tell different stories (one says the guard costs successful runs, the other that it does not).
    The open-loop side is the guard as configured — its stop / escalate verdicts halt — since that is
    what the closed loop plays."""
    by = {(r.get("run", ""), r["detector"], r["metric"]): r for r in view.rows if r["action"] == "configured"}
    out = []
    for run in view.runs or [""]:
        where = f" on {run}" if run else ""
        for r in view.closed:
            o = by.get((run, r["detector"], "successes_stopped"))
            if o is None or o["value"] is None or r["success_change"] is None:
                continue
            open_costs = o["value"] > 0.01
            closed_costs = r["success_change"] < -0.01
            if open_costs != closed_costs:
                out.append(_disagreement(r, o, where, open_costs))
    return out


def _disagreement(r: dict, o: dict, where: str, open_costs: bool) -> str:
    return (f"`{r['detector']}` as configured stops {number_text(o['value'], 1, True)} of successful runs open loop{where}, "
            f"but its closed-loop task success changes by {number_text(r['success_change'], 1, True)} "
            + ("(a halt after the work is done, or on a branch the agent had left, costs nothing)."
               if open_costs else "(the guard stops or misleads runs whose unguarded play would have succeeded).")
            )


__all__ = ["CURVE_COLUMNS", "CLOSED_DEPLOY_COLUMNS", "CORPUS_DEPLOY_COLUMNS", "DEPLOY_COLUMNS", "DeployView", "deploy_view", "closed_view",
           "plot_operating_curve", "deploy_section", "disagreements"]
