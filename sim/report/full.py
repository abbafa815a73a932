"""``loopbench report``: intervals, thresholds, Δ view and plots of one or more run folders,
as ``report.md`` and a self-contained ``report.html``.

Every number is recomputed from the run folders' files; the report shows each run's
manifest (configuration hash, seeds, package versions, profile-weights version). The
tables it writes beside the report: ``intervals.csv``, ``paired.csv``, ``thresholds.csv``,
``delta_sensitivity.csv``, ``threshold_curves.csv``; plots go to ``plots/``.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from sim.report.transfer import (HELDOUT_TRANSFER_COLUMNS, TRANSFER_COLUMNS, heldout_text, heldout_transfer,
                                 plot_transfer, pooled_heldout, run_scores, summary_text, tau_text, transfer)
from sim.report.analysis import Analysis, analyse, load_runs
from sim.report.crossval import (CV_COLUMNS, POOLED, CrossVal, CrossValError, Grid, by_corpus, check_run, corpus_cv,
                                 splits_by_corpus)
from sim.report.crossval import verdict as cv_verdict
from sim.report.cv_deploy import CV_DEPLOY_COLUMNS, cv_deploy_section, heldout_deploy
from sim.report.deploy_view import (CLOSED_DEPLOY_COLUMNS, CORPUS_DEPLOY_COLUMNS, CURVE_COLUMNS as DEPLOY_CURVE_COLUMNS,
                                    DEPLOY_COLUMNS, DeployView, deploy_section, deploy_view, plot_operating_curve)
from scenarios.files import atomic_write
from sim.config.manifest import harness_text
from sim.files import write_csv
from sim.heap import no_full_collections
from sim.numbers import number_text

INTERVAL_COLUMNS = ["detector", "family", "metric", "value", "lo", "hi"]
PAIRED_COLUMNS = ["detector_a", "detector_b", "metric", "diff", "lo", "hi"]
THRESHOLD_COLUMNS = ["detector", "kind", "value", "far", "far_lo", "far_hi", "miss_rate", "miss_lo", "miss_hi",
                     "median_delay", "score_standard", "score_lo", "score_hi", "note"]
DELTA_COLUMNS = ["detector", "delta", "tp", "miss", "early", "late", "miss_rate", "median_delay", "score_standard",
                 "score_low_FP", "score_low_FN"]
CURVE_COLUMNS = ["detector", "param", "value", "far", "miss_rate", "median_delay", "score_standard", "default"]


# -- a tiny document model rendered twice (Markdown and HTML) ---------------------------------------
class Doc:
    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.blocks.append(("table", header, rows))

    def img(self, path: Path, rel: str, title: str, caption: str) -> None:
        self.blocks.append(("img", path, rel, title, caption))

    def markdown(self) -> str:
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out.append("#" * b[1] + " " + b[2])
            elif b[0] == "p":
                out.append(b[1])
            elif b[0] == "table":
                out.append("| " + " | ".join(b[1]) + " |")
                out.append("|" + "|".join("---" for _ in b[1]) + "|")
                out += ["| " + " | ".join(r) + " |" for r in b[2]]
            elif b[0] == "img":
                out.append(f"![{b[3]}]({b[2]})")
                out.append("")
                out.append(f"*{b[4]}*")
            out.append("")
        return "\n".join(out)

    def html(self, title: str) -> str:
        def inline(text: str) -> str:
            t = html.escape(text)
            t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
            return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)

        body = []
        for b in self.blocks:
            if b[0] == "h":
                body.append(f"<h{b[1]}>{inline(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                body.append(f"<p>{inline(b[1])}</p>")
            elif b[0] == "table":
                head = "".join(f"<th>{inline(c)}</th>" for c in b[1])
                rows = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in b[2])
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            elif b[0] == "img":
                data = base64.b64encode(Path(b[1]).read_bytes()).decode("ascii")
                body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(b[3])}">'
                            f"<figcaption>{inline(b[4])}</figcaption></figure>")
        css = ("body{font-family:system-ui,sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;color:#222}"
               "table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;"
               "text-align:left}th{background:#f3f3f3}tr:nth-child(even){background:#fafafa}code{background:#f3f3f3;"
               "padding:0 3px}img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-style:italic}")
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
                f"<style>{css}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


# -- cells ---------------------------------------------------------------------------------------------
def _ci(r, digits: int = 1, pct: bool = False) -> str:
    if r is None:
        return "–"
    return f"{number_text(r['value'], digits, pct)} [{number_text(r['lo'], digits, pct)}, {number_text(r['hi'], digits, pct)}]"


def _value(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    return f"{v:g}" if isinstance(v, float) else str(v)


class _Lookup:
    def __init__(self, rows: list[dict]):
        self.rows = {(r["detector"], r["family"], r["metric"]): r for r in rows}

    def __call__(self, det: str, metric: str, family: str = "all"):
        return self.rows.get((det, family, metric))


# -- the document ----------------------------------------------------------------------------------------
def _builder(data) -> Callable[[str], Any]:
    """Rebuild a run's detector by label (for its ``threshold_for``)."""
    from sim.config.spec import DetectorSpec

    return lambda det: DetectorSpec(det, *data.specs[det]).build()


def build_doc(an: Analysis, plots: list[tuple[str, str, str, Path]], out: Path, view: DeployView | None = None) -> Doc:
    data = an.data
    doc = Doc()
    m0 = data.manifests[0]
    suite = m0.get("config", {}).get("suite", "replay")
    doc.h(1, f"loopbench report — suite `{suite}`")
    doc.p("Every number below is recomputed by `loopbench report` from the run folder(s) listed here: nothing is "
          "typed in by hand. Open loop = each detector scores every call of fixed episodes, halting at its first "
          "alarm; closed loop = the detector sits in the harness and its verdicts change the run.")
    doc.h(2, "Run manifest")
    rows = []
    for d, m in zip(data.dirs, data.manifests):
        cfg = m.get("config", {})
        rows.append([f"`{d}`", f"`{m.get('config_hash', '?')}`", str(cfg.get("suite", "replay")),
                     str(m.get("seeds", {}).get("suite", cfg.get("seed", "–"))), str(m.get("episodes", "–")),
                     str(m.get("tool_calls", "–")), str(cfg.get("delta", "–")), str(m.get("profiles_version", "?")),
                     str(m.get("wall_seconds", "–"))])
    doc.table(["run folder", "config hash", "suite", "seed", "episodes", "tool calls", "Δ (calls)", "profile weights",
               "wall s"], rows)
    versions = m0.get("versions", {})
    doc.p("Package versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + ".")
    doc.p(f"Uncertainty: {an.rounds} bootstrap rounds (seed {an.seed}) resampling episodes with replacement within "
          "each family (the cluster is the episode, so a branching episode's paths move together; the family mix "
          "stays fixed). 95% percentile intervals in brackets; an interval of zero width means every episode of each "
          "family had the same outcome, so resampling within families cannot move the figure (variation between "
          "families is not sampled: the suite fixes them). Paired differences use the same rounds for both "
          "detectors." + (f" {len(data.dirs)} run folders are pooled as more episodes of each family."
                         if data.pooled else ""))
    iv = _Lookup(an.intervals)
    civ = _Lookup(an.closed_intervals)
    timings = data.timings
    p50 = timings[timings["mode"] == "open"].groupby("detector")["p50_us"].median() if len(timings) else pd.Series(dtype=float)
    ranked = sorted(data.detectors, key=lambda d: -(iv(d, "score_standard") or {"value": -1e9})["value"])
    medians = {}
    if len(data.outcomes):
        for d in data.detectors:
            ds = an.delays.get(d, [])
            medians[d] = float(pd.Series(ds).median()) if ds else None
    plot_of = {name: (p, heading, caption) for name, heading, caption, p in plots}

    def img(name: str) -> None:
        if name in plot_of:
            p, heading, caption = plot_of[name]
            doc.img(p, f"plots/{name}", heading, caption)

    if ranked and len(data.outcomes):
        doc.h(2, "Scoreboard (open loop)")
        doc.p(f"Score: NAB-shaped composite per episode, 0 = never fires, 100 = catches every loop at its onset with no "
              f"false alarm (profiles standard / low-FP / low-FN, weights v{an.profiles_version}). FAR = false-alarm "
              f"rate on clean episodes. Miss = looping paths not caught within Δ = {data.delta} calls. Delay in calls "
              "after the onset. alarms/1k = advisory mode (no halt): alarms per 1,000 non-loop calls.")
        rows = []
        for d in ranked:
            rows.append([f"`{d}`", _ci(iv(d, "score_standard")), _ci(iv(d, "score_low_FP")), _ci(iv(d, "score_low_FN")),
                         _ci(iv(d, "false_alarm_rate"), 1, True), _ci(iv(d, "miss_rate"), 1, True),
                         _ci(iv(d, "early_rate"), 1, True), number_text(medians.get(d)), _ci(iv(d, "mean_delay")),
                         _ci(iv(d, "alarms_per_1k")), number_text(p50.get(d), 2)])
        doc.table(["detector", "score", "low-FP", "low-FN", "FAR", "miss", "early", "median delay", "mean delay",
                   "alarms/1k", "p50 µs/check"], rows)
        img("scores.png")
        best = ranked[0]
        pr = {(r["detector_a"], r["detector_b"], r["metric"]): r for r in an.paired}

        def diff(a, b, metric, pct=False):
            if (a, b, metric) in pr:
                r = pr[(a, b, metric)]
                s = 1
            elif (b, a, metric) in pr:
                r, s = pr[(b, a, metric)], -1
            else:
                return "–"
            lo, hi = (r["lo"], r["hi"]) if s == 1 else (-r["hi"], -r["lo"])
            mark = " **≠**" if lo is not None and hi is not None and (lo > 0 or hi < 0) else ""
            return f"{number_text(s * r['diff'], 1, pct)} [{number_text(lo, 1, pct)}, {number_text(hi, 1, pct)}]{mark}"

        doc.h(3, f"Paired differences against the top detector `{best}`")
        doc.p("Other detector minus the top one, computed in the same bootstrap rounds; **≠** marks an interval that "
              "excludes 0. All pairs are in `paired.csv`.")
        doc.table(["detector", "Δ score", "Δ miss rate", "Δ FAR"],
                  [[f"`{d}`", diff(d, best, "score_standard"), diff(d, best, "miss_rate", True),
                    diff(d, best, "false_alarm_rate", True)] for d in ranked[1:]])
        doc.h(2, "Per family")
        img("misses_by_family.png")
        img("false_alarms_by_family.png")
        doc.p("Per-family intervals for every metric are in `intervals.csv`.")
    if an.thresholds:
        doc.h(2, "Thresholds three ways")
        doc.p("**default** = the value the run used; **calibrated@1% / @5%** = lowest miss rate whose FAR on the clean "
              "episodes is at most the target; **calibrated_heldout** = leave-one-family-out (each family scored at the "
              "value that maximises the standard score on the other families; the value shown is the one picked most "
              "often); **oracle** = best standard score on the scored episodes themselves, an upper bound and never the "
              "headline. Thresholds are swept in one pass from the stored per-call scores; the selection is redone in "
              "every bootstrap round, so the intervals include the selection's own variability.")
        rows = []
        order = {d: i for i, d in enumerate(ranked)}
        for r in sorted(an.thresholds, key=lambda r: order.get(r["detector"], 99)):
            band = lambda k: (f" [{number_text(r.get(k + '_lo'), 1, k != 'score')}, {number_text(r.get(k + '_hi'), 1, k != 'score')}]"  # noqa: E731
                              if r.get(k + "_lo") is not None else "")
            rows.append([f"`{r['detector']}`", r["kind"], _value(r["value"]), number_text(r["far"], 1, True) + band("far"),
                         number_text(r["miss_rate"], 1, True) + band("miss"), number_text(r["median_delay"]),
                         number_text(r["score_standard"]) + band("score"), r.get("note", "")])
        doc.table(["detector", "kind", "value", "FAR", "miss", "median delay", "score", "note"], rows)
        img("tradeoff_far_miss.png")
        img("tradeoff_far_delay.png")
    if len(data.outcomes):
        doc.h(2, "Detection delay")
        img("delays.png")
        doc.h(2, "Cost")
        if len(timings):
            t = timings[timings["mode"] == "open"].groupby("detector").agg(
                checks=("checks", "sum"), p50=("p50_us", "median"), p95=("p95_us", "median"),
                model_calls=("model_calls", "sum"))
            doc.p("Measured on this machine (kept out of `metrics.csv` because it varies between runs).")
            doc.table(["detector", "checks", "p50 µs", "p95 µs", "model calls"],
                      [[f"`{d}`", str(int(t.loc[d, "checks"])), number_text(t.loc[d, "p50"], 2), number_text(t.loc[d, "p95"], 2),
                        str(int(t.loc[d, "model_calls"]))] for d in ranked if d in t.index])
        img("cost_vs_score.png")
    if len(data.closed_metrics):
        doc.h(2, "Closed loop")
        cm = data.closed_metrics
        cm = cm[cm["family"] == "all"].groupby("detector").agg(
            episodes=("episodes", "sum"), wasted_calls=("wasted_calls", "sum"), wasted_spend=("wasted_spend", "sum"),
            nudges=("nudges", "sum"), prunes=("prunes", "sum"), escalations=("escalations", "sum"),
            stops=("stops", "sum"), false_interventions=("false_interventions", "sum"),
            ended=("ended", lambda s: "; ".join(str(x).replace(";", ", ") for x in s)))
        dets = sorted(cm.index, key=lambda d: -(civ(d, "success_rate") or {"value": 0})["value"])
        doc.p("Task success and wasted spend (tool prices + tokens spent inside loops) with 95% intervals; interventions "
              "by kind; false interventions = interventions on calls that were not loops. Harness: "
              + "; ".join(dict.fromkeys(harness_text(m) for m in data.manifests)) + ".")
        doc.table(["detector", "task success", "wasted calls / episode", "wasted spend / episode ($)", "nudges", "prunes",
                   "escalations", "stops", "false interventions", "how episodes ended"],
                  [[f"`{d}`", _ci(civ(d, "success_rate"), 1, True), _ci(civ(d, "wasted_calls_per_episode")),
                    _ci(civ(d, "wasted_spend_per_episode"), 3), str(int(cm.loc[d, "nudges"])), str(int(cm.loc[d, "prunes"])),
                    str(int(cm.loc[d, "escalations"])), str(int(cm.loc[d, "stops"])),
                    str(int(cm.loc[d, "false_interventions"])), cm.loc[d, "ended"]] for d in dets])
        img("closed_loop.png")
    if view is not None:
        deploy_section(doc, view, ranked, img)
    if an.delta_rows:
        doc.h(2, "Δ sensitivity")
        dr = pd.DataFrame(an.delta_rows)
        deltas = sorted(dr["delta"].unique())
        doc.p(f"Miss rate at other detection windows Δ, re-scored from the stored per-call verdicts (the run used Δ = "
              f"{data.delta}). All columns, including the composite per profile, are in `delta_sensitivity.csv`.")
        rows = []
        for d in ranked:
            g = dr[dr.detector == d].set_index("delta")
            rows.append([f"`{d}`"] + [f"{number_text(g.loc[x, 'miss_rate'], 0, True)} / {number_text(g.loc[x, 'score_standard'], 0)}"
                                      if x in g.index else "–" for x in deltas])
        doc.table(["detector (miss / score)"] + [f"Δ={x}" for x in deltas], rows)
        img("delta_sensitivity.png")
    if an.notes:
        doc.h(2, "Notes")
        for n in an.notes:
            doc.p("- " + n)
    doc.h(2, "Detectors")
    for det in m0.get("detectors", []):
        doc.p(f"- `{det['label']}`: `{det.get('class', '?')}` `{_params(det.get('params', {}))}`")
    return doc


def _params(params: dict) -> str:
    import json

    return json.dumps(params, sort_keys=True)


def write_report(run_dirs: Sequence[str | Path], out: str | Path | None = None, *, rounds: int = 1000, seed: int = 0,
                 log: Callable[[str], None] = lambda s: None, transfer_run: str | Path | None = None,
                 cv: str | None = None, cv_grids: Callable[[Any], Mapping[str, Grid]] | None = None,
                 rule_grids: Callable[[Any, set[str], list[str]], Mapping[str, Grid]] | None = None) -> dict[str, Any]:
    """Analyse run folder(s) and write the tables, plots, ``report.md`` and ``report.html`` into ``out``.

    ``out`` defaults to the (first) run folder. The CSV tables are written before any plot
    is drawn, so a plotting failure never loses them. With ``transfer_run`` (a run on real
    traces) the report also compares the two rankings (``transfer.csv``, a section and a plot).
    With ``cv="corpus"`` (a run on real traces) it adds leave-one-corpus-out (``cv.csv``,
    ``cv_deploy.csv`` and a section, :mod:`sim.report.crossval`); a run that cannot be split by
    corpus raises :class:`sim.report.crossval.CrossValError` before anything is written;
    ``cv="auto"`` adds it when the run can be split, silently not otherwise. ``cv_grids(data)``
    returns parameter grids to choose per fold as well (:mod:`sim.tuning.loco`).
    ``rule_grids(data, taken, notes)``: the grids that hold out the rules a detector declares were
    written from each corpus (:func:`sim.tuning.loco.rule_grids`; detectors in ``taken`` already
    have a grid), used by ``cv`` and by the transfer's held-out ranking; notes go to ``notes``.
    """
    with no_full_collections():  # the runs' rows and traces stay loaded to the end (``sim.heap``)
        return _write_report(run_dirs, out, rounds, seed, log, transfer_run, cv, cv_grids, rule_grids)


def _write_report(run_dirs: Sequence[str | Path], out: str | Path | None, rounds: int, seed: int,
                  log: Callable[[str], None], transfer_run: str | Path | None, cv: str | None = None,
                  cv_grids: Callable[[Any], Mapping[str, Grid]] | None = None,
                  rule_grids: Callable[[Any, set[str], list[str]], Mapping[str, Grid]] | None = None) -> dict[str, Any]:
    from sim.report.plots import palette, write_plots

    data = load_runs(run_dirs)
    grids = None
    notes: list[str] = []
    cv_data = by_corpus(data)  # each episode under its corpus (real-injected's families are kinds)
    if cv == "auto":  # held out beside dev wherever the run has corpora to hold out
        cv = "corpus" if splits_by_corpus(cv_data) else None
    if cv is not None:
        check_run(cv_data)  # refuse before the long part
        grids = dict(cv_grids(cv_data)) if cv_grids is not None else {}
        if rule_grids is not None:
            grids.update(rule_grids(cv_data, set(grids), notes))
    out = Path(out) if out is not None else data.dirs[0]
    out.mkdir(parents=True, exist_ok=True)
    an = analyse(data, rounds=rounds, seed=seed, keep_sweeps=cv is not None)  # cv picks from the same sweeps
    write_csv(out / "intervals.csv", an.intervals + an.closed_intervals, INTERVAL_COLUMNS)
    write_csv(out / "paired.csv", an.paired + an.closed_paired, PAIRED_COLUMNS)
    write_csv(out / "thresholds.csv", an.thresholds, THRESHOLD_COLUMNS)
    write_csv(out / "threshold_curves.csv", an.curves, CURVE_COLUMNS)
    write_csv(out / "delta_sensitivity.csv", an.delta_rows, DELTA_COLUMNS)
    moved = None
    if transfer_run is not None:
        real_dir = Path(transfer_run)
        synthetic = run_scores(data.dirs[0])
        rows, summary = transfer(synthetic, run_scores(real_dir))
        write_csv(out / "transfer.csv", rows, TRANSFER_COLUMNS)
        held = _heldout_transfer(synthetic, _calibrated_heldout(an, synthetic), real_dir, rounds, seed, rule_grids, notes)
        if held is not None:
            write_csv(out / "transfer_cv.csv", held[0], HELDOUT_TRANSFER_COLUMNS)
            summary["heldout"], summary["heldout_ranking"] = held
        moved = (real_dir, rows, summary)
    crossval = None
    cv_deploy: list[dict] = []
    if cv is not None:
        crossval = corpus_cv(cv_data, rounds=rounds, seed=seed, grids=grids, analysis=an)
        write_csv(out / "cv.csv", crossval.rows, CV_COLUMNS)
        cv_deploy, deploy_notes = heldout_deploy(cv_data, crossval, grids, _builder(data), rounds=rounds, seed=seed)
        notes += deploy_notes
        if cv_deploy:
            write_csv(out / "cv_deploy.csv", cv_deploy, CV_DEPLOY_COLUMNS)
    view = deploy_view(data, _builder(data), rounds=rounds, seed=seed)
    by_run = ["run"] if view.runs else []  # a report of several runs: each run's rows apart
    write_csv(out / "deploy.csv", view.rows, by_run + DEPLOY_COLUMNS)
    write_csv(out / "deploy_curves.csv", view.curves, by_run + DEPLOY_CURVE_COLUMNS)
    write_csv(out / "closed_deploy.csv", view.closed, CLOSED_DEPLOY_COLUMNS)
    if view.corpora:
        write_csv(out / "deploy_corpora.csv", view.corpora, by_run + CORPUS_DEPLOY_COLUMNS)
    plots = write_plots(an, out / "plots", log)
    try:
        curve = plot_operating_curve(view, out / "plots" / "operating_curve.png", palette(data.detectors))
    except Exception as exc:  # noqa: BLE001 — a plot must not lose the tables
        log(f"plot operating_curve.png failed: {type(exc).__name__}: {exc}")
        curve = None
    if curve is not None:
        plots.append(("operating_curve.png", "Operating curve",
                      "Each detector's swept threshold: calls saved on failed runs against successful runs stopped, "
                      "halting at the first alarm (a guard that nudges first: at each halt level, e.g. stop_after); "
                      "the ring marks the value the run used.", curve))
    doc = build_doc(an, plots, out, view)
    if moved is not None:
        _transfer_section(doc, an, moved, out, log)
    if crossval is not None:
        _cv_section(doc, crossval)
        if cv_deploy:
            cv_deploy_section(doc, crossval, cv_deploy)
    title = f"loopbench report — {data.manifests[0].get('config', {}).get('suite', 'replay')}"
    atomic_write(out / "report.md", doc.markdown())
    atomic_write(out / "report.html", doc.html(title))
    result = {"out": str(out), "plots": [str(p) for *_, p in plots], "seconds": an.seconds, "notes": an.notes + notes}
    if moved is not None:
        result["transfer"] = moved[2]
    if crossval is not None:
        result["cv"] = crossval
        result["cv_deploy"] = cv_deploy
    return result


def _calibrated_heldout(an: Analysis, as_run: Mapping[str, float]) -> dict[str, float]:
    """The run's scores with each detector's threshold chosen leave-one-family-out (its
    ``calibrated_heldout`` row); as run for a detector without a threshold."""
    out = dict(as_run)
    for r in an.thresholds:
        if r["kind"] == "calibrated_heldout" and r["detector"] in out and r["score_standard"] is not None:
            out[r["detector"]] = float(r["score_standard"])
    return out


def _heldout_transfer(synthetic: Mapping[str, float], synthetic_heldout: Mapping[str, float], real_dir: Path,
                      rounds: int, seed: int,
                      rule_grids: Callable[[Any, set[str], list[str]], Mapping[str, Grid]] | None = None,
                      notes: list[str] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """The held-out transfer rows when the real run's families are corpora; None otherwise (a
    run of one corpus, a synthetic run, a run without per-episode outcomes). The τ-b intervals
    come from the real run's bootstrap, ``rounds`` rounds (about 0.5 s for 1000). With
    ``rule_grids`` the real side's held-out scores also hold out each detector's rules. Also
    returns both rankings, the real one by pooled held-out score (``transfer``'s rows), for the plot."""
    try:
        real = by_corpus(load_runs([real_dir]))
        check_run(real)
    except CrossValError:
        return None
    grids = rule_grids(real, set(), notes if notes is not None else []) if rule_grids is not None else None
    cv = corpus_cv(real, rounds=rounds, seed=seed, grids=grids)
    held = [d for d, g in (grids or {}).items() if g.heldout_cells is not None]
    return (heldout_transfer(synthetic, cv.rows, cv.corpora, synthetic_heldout, cv.heldout_rounds, held),
            transfer(synthetic, pooled_heldout(cv.rows))[0])


def _cv_section(doc: Doc, cv: CrossVal) -> None:
    """Leave-one-corpus-out: per detector and corpus, the standard score in-sample and held out."""
    doc.h(2, "Leave-one-corpus-out")
    doc.p("For every corpus, each detector's threshold is chosen (best standard score) on the **other** corpora "
          "and scored on the held-out one (**held-out**); **in-sample** chooses it on all corpora, the held-out one "
          "included. Gap = in-sample − held-out. A detector that declares which corpora its rules were written "
          "from (`progress_guard`) is scored held out with the rules written from that corpus switched off — as it "
          "would be had the corpus never been read — and in-sample as shipped (threshold columns: the variant); "
          "`--no-cv-rules` keeps its rules in. Another detector without a threshold parameter is scored as run in "
          "both. "
          f"{cv.rounds} bootstrap rounds (seed {cv.seed}), episodes resampled within each corpus, the choice redone "
          "in every round; gaps and differences are paired. Recall, early rate, FAR and recall − FAR are in `cv.csv`."
          + (f" vs `{cv.reference}` = held-out score minus `{cv.reference}`'s held-out score; **≠** marks an "
             "interval that excludes 0." if cv.reference else ""))

    def ci(r, key, lo, hi) -> str:
        return f"{number_text(r[key])} [{number_text(r[lo])}, {number_text(r[hi])}]"

    rows = []
    for det in cv.detectors():
        for corpus in cv.corpora + [POOLED]:
            r = cv.get(det, corpus)
            vs = "–"
            if cv.reference and det != cv.reference and r["vs_reference"] is not None:
                excl = r["vs_reference_lo"] is not None and (r["vs_reference_lo"] > 0 or r["vs_reference_hi"] < 0)
                vs = ci(r, "vs_reference", "vs_reference_lo", "vs_reference_hi") + (" **≠**" if excl else "")
            rows.append([f"`{det}`", f"`{corpus}`", r["value_in_sample"] or "–", r["value_heldout"] or "–",
                         ci(r, "in_sample", "in_lo", "in_hi"), ci(r, "heldout", "heldout_lo", "heldout_hi"),
                         ci(r, "gap", "gap_lo", "gap_hi"), vs])
    doc.table(["detector", "corpus", "threshold in-sample", "threshold held-out", "in-sample score",
               "held-out score", "gap", f"vs `{cv.reference}`" if cv.reference else "vs reference"], rows)
    if (said := cv_verdict(cv)):
        doc.p(said)


def _transfer_section(doc: Doc, an: Analysis, moved, out: Path, log: Callable[[str], None]) -> None:
    """The transfer section: both rankings, τ, the top picks, per-detector deltas, and the plot."""
    real_dir, rows, summary = moved
    synth_name = an.data.manifests[0].get("config", {}).get("suite", "synthetic")
    real_manifest = real_dir / "manifest.json"
    real_name = str(real_dir)
    if real_manifest.is_file():
        import json

        real_name = json.loads(real_manifest.read_text(encoding="utf-8")).get("config", {}).get("suite", real_name)
    doc.h(2, f"Transfer: synthetic `{synth_name}` against real `{real_name}`")
    doc.p(summary_text(summary) + f" Ranked by the standard composite score of each run's `all` row; the real run "
          f"is `{real_dir}`. A positive rank change means the detector does worse on the real traces than the "
          "synthetic suite says.")
    doc.table(["detector", "synthetic score", "synthetic rank", "real score", "real rank", "rank change",
               "score change"],
              [[f"`{r['detector']}`", number_text(r["synthetic_score"]), str(r["synthetic_rank"]),
                number_text(r["real_score"]), str(r["real_rank"]), f"{r['rank_change']:+d}",
                f"{r['score_change']:+.1f}"] for r in rows])
    held = summary.get("heldout")
    if held:
        doc.p(heldout_text(held) + " The real ranking here is leave-one-corpus-out's (`cv.csv` of `loopbench "
              "report REAL --cv corpus`): held out, each detector's threshold is chosen on the other corpora and "
              "scored on the held-out one; in-sample chooses it on all corpora; as run keeps the threshold the run "
              "used; both held out also ranks the synthetic side with each threshold chosen leave-one-family-out "
              "(its `calibrated_heldout` row), so neither side is tuned on what it scores. Held out, a detector "
              "that declares where its rules came from (`progress_guard`) is scored on each corpus without the "
              "rules written from it, unless the report was made with `--no-cv-rules`. A detector without a "
              "threshold or such rules scores the same every way.")
        doc.table(["real corpus", "detectors", "τ-b as run", "τ-b in-sample", "τ-b held out", "τ-b both held out",
                   "real top as run", "real top in-sample", "real top held out", "synthetic top's rank held out"],
                  [[f"`{r['corpus']}`", str(r["detectors"]), tau_text(r["tau_as_run"]), tau_text(r["tau_in_sample"]),
                    tau_text(r["tau_heldout"], r.get("tau_heldout_lo"), r.get("tau_heldout_hi")),
                    tau_text(r["tau_both_heldout"], r.get("tau_both_heldout_lo"), r.get("tau_both_heldout_hi")),
                    f"`{r['top_as_run']}`", f"`{r['top_in_sample']}`", f"`{r['top_heldout']}`",
                    str(r["synthetic_top_rank_heldout"])] for r in held])
    if summary["only_synthetic"] or summary["only_real"]:
        doc.p("Not compared (scored in one run only): " + ", ".join(
            [f"`{d}` (synthetic)" for d in summary["only_synthetic"]] + [f"`{d}` (real)" for d in summary["only_real"]]) + ".")
    plots = [("transfer.png", rows, real_name, "Transfer of the ranking",
              "Each line is a detector: its rank on the synthetic run (left) and on the real traces (right).")]
    if summary.get("heldout_ranking"):
        plots.append(("transfer_heldout.png", summary["heldout_ranking"], f"{real_name}, held out",
                      "Transfer of the ranking, held out",
                      "The same, ranked on the real traces by the pooled leave-one-corpus-out score: each corpus "
                      "scored at the threshold the other corpora chose, and without the rules written from it."))
    for name, ranked, right, title, caption in plots:
        try:
            path = plot_transfer(ranked, out / "plots" / name, synth_name, right)
        except Exception as exc:  # noqa: BLE001 — a plot must not lose the table above
            log(f"plot {name} failed: {type(exc).__name__}: {exc}")
            continue
        if path is not None:
            doc.img(path, f"plots/{path.name}", title, caption)
