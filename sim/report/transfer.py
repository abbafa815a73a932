"""Transfer: how well one run's ranking of detectors predicts another's (SPEC §10).

Given a synthetic run and a real one (labelled real traces, e.g. ``--suite real-dev``), both
rankings by the standard composite score side by side, Kendall's τ-b between them, where each
run's top pick lands in the other, and per-detector deltas. Only detectors scored in both runs
are compared.

When the real run's families are corpora (``real-dev``), :func:`heldout_transfer` also ranks
the real side as leave-one-corpus-out scores it (:mod:`sim.report.crossval`: each detector's
threshold chosen on the other corpora): τ-b against the synthetic ranking pooled and corpus by
corpus, in-sample and held out side by side — how far the suite's verdict holds on a corpus
nobody tuned on.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from sim.numbers import as_float
from sim.scoring.uncertainty import percentile_interval

HELDOUT_TRANSFER_COLUMNS = ["corpus", "detectors", "tau_as_run", "tau_in_sample", "tau_heldout", "tau_heldout_lo",
                            "tau_heldout_hi", "tau_both_heldout", "tau_both_heldout_lo", "tau_both_heldout_hi",
                            "top_as_run", "top_in_sample", "top_heldout", "synthetic_top", "synthetic_top_rank_heldout",
                            "rules_held_out"]
TRANSFER_COLUMNS = ["detector", "synthetic_score", "synthetic_rank", "real_score", "real_rank", "rank_change",
                    "score_change"]
SCORE = "score_standard"


def run_scores(run_dir: str | Path, score: str = SCORE) -> dict[str, float]:
    """Detector -> its ``all``-family score in a run folder's metrics.csv (detectors without one left out)."""
    path = Path(run_dir) / "metrics.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (is {run_dir} a run folder?)")
    m = pd.read_csv(path)
    rows = m[m["family"] == "all"]
    out = {}
    for det, v in zip(rows["detector"], rows[score]):
        f = as_float(v)
        if f is not None:
            out[str(det)] = f
    return out


def ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """1 = best; ties share the better rank (competition ranking), order otherwise by name."""
    ordered = sorted(scores, key=lambda d: (-scores[d], d))
    out: dict[str, int] = {}
    for i, d in enumerate(ordered):
        prev = ordered[i - 1] if i else None
        out[d] = out[prev] if prev is not None and scores[prev] == scores[d] else i + 1
    return out


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's τ-b of two paired sequences (ties handled); None when undefined (fewer than
    two items, or one side all tied)."""
    tau = kendall_tau_b_rounds(x, np.asarray([y], dtype=float))[0]
    return None if np.isnan(tau) else float(tau)


def kendall_tau_b_rounds(x: Sequence[float], ys: np.ndarray) -> np.ndarray:
    """τ-b of ``x`` against each row of ``ys`` ``(rounds, n)``: concordant minus discordant
    pairs over the square root of (pairs untied in ``x``) × (pairs untied in the row); NaN
    where undefined or where the row holds a NaN."""
    x = np.asarray(x, dtype=float)
    i, j = np.triu_indices(len(x), k=1)
    dx = np.sign(x[i] - x[j])
    dy = np.sign(ys[:, i] - ys[:, j])
    denom = np.sqrt(np.count_nonzero(dx) * np.count_nonzero(dy, axis=1).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (dy @ dx) / np.where(denom > 0, denom, 1.0), np.nan)


def transfer(synthetic: Mapping[str, float], real: Mapping[str, float]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(rows per detector, summary) for the detectors scored in both runs."""
    common = sorted(set(synthetic) & set(real))
    s = {d: synthetic[d] for d in common}
    r = {d: real[d] for d in common}
    rs, rr = ranks(s), ranks(r)
    rows = [{"detector": d, "synthetic_score": s[d], "synthetic_rank": rs[d], "real_score": r[d], "real_rank": rr[d],
             "rank_change": rr[d] - rs[d], "score_change": r[d] - s[d]} for d in sorted(common, key=lambda d: rs[d])]
    tau = kendall_tau_b([s[d] for d in common], [r[d] for d in common])
    top_s = min(common, key=lambda d: (rs[d], d)) if common else None
    top_r = min(common, key=lambda d: (rr[d], d)) if common else None
    summary = {"detectors": len(common), "kendall_tau": tau, "top_synthetic": top_s, "top_real": top_r,
               "top_synthetic_real_rank": rr.get(top_s), "top_real_synthetic_rank": rs.get(top_r),
               "same_top": top_s is not None and rr.get(top_s) == 1,
               "only_synthetic": sorted(set(synthetic) - set(real)), "only_real": sorted(set(real) - set(synthetic))}
    return rows, summary


def heldout_transfer(synthetic: Mapping[str, float], cv_rows: Sequence[Mapping[str, Any]],
                     corpora: Sequence[str], synthetic_heldout: Mapping[str, float] | None = None,
                     heldout_rounds: Mapping[str, np.ndarray] | None = None,
                     rules_held_out: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Per corpus and pooled (``"pooled"``, last): τ-b of the synthetic ranking against the real
    one as run (the thresholds the run used), in-sample and held out, the real top pick each way,
    and where the synthetic top pick ranks held out.

    ``cv_rows``: the rows of a :class:`sim.report.crossval.CrossVal` on the real run (its
    ``score_standard`` point estimates are ranked).
    ``synthetic_heldout``: the synthetic run's scores with each threshold chosen without the
    family scored (the report's ``calibrated_heldout``; as run for a detector without one):
    ``tau_both_heldout`` ranks both sides held out, neither tuned on what it scores.
    ``heldout_rounds``: the CrossVal's per-round held-out scores; with them the held-out τ-b
    values get a 95% bootstrap interval (``*_lo``, ``*_hi``, :func:`_tau_interval`): how far the
    real traces' sampling alone moves them (the synthetic side held fixed).
    ``rules_held_out``: the detectors scored held out without the rules written from each corpus
    (``loopbench report --cv-rules``), named in every row.
    """
    out = []
    for ci, corpus in enumerate([*corpora, "pooled"]):
        cols = {}
        for side in ("as_run", "in_sample", "heldout"):
            cols[side] = transfer(synthetic, _side(cv_rows, corpus, side))[1]
        ho = cols["heldout"]
        both = transfer(synthetic_heldout, _side(cv_rows, corpus, "heldout"))[1] if synthetic_heldout is not None else None
        ho_lo, ho_hi = _tau_interval(ho["kendall_tau"], synthetic, heldout_rounds, ci)
        both_lo, both_hi = _tau_interval(both["kendall_tau"] if both is not None else None, synthetic_heldout,
                                         heldout_rounds, ci)
        out.append({"corpus": corpus, "detectors": ho["detectors"], "tau_as_run": cols["as_run"]["kendall_tau"],
                    "tau_in_sample": cols["in_sample"]["kendall_tau"], "tau_heldout": ho["kendall_tau"],
                    "tau_heldout_lo": ho_lo, "tau_heldout_hi": ho_hi,
                    "tau_both_heldout": both["kendall_tau"] if both is not None else None,
                    "tau_both_heldout_lo": both_lo, "tau_both_heldout_hi": both_hi,
                    "top_as_run": cols["as_run"]["top_real"], "top_in_sample": cols["in_sample"]["top_real"],
                    "top_heldout": ho["top_real"], "synthetic_top": ho["top_synthetic"],
                    "synthetic_top_rank_heldout": ho["top_synthetic_real_rank"],
                    "rules_held_out": " ".join(sorted(rules_held_out))})
    return out


def _tau_interval(point: float | None, synthetic: Mapping[str, float] | None,
                  rounds: Mapping[str, np.ndarray] | None, column: int) -> tuple[float | None, float | None]:
    """The 95% basic bootstrap interval of τ-b between ``synthetic`` and the real held-out
    scores of one corpus column; (None, None) without rounds.

    Resampling adds noise to the real scores, and noise only breaks an order: τ-b over the rounds
    sits below the point estimate, as the point estimate sits below the τ-b of unlimited traces.
    The basic interval (twice the point minus the rounds' 97.5th and 2.5th percentiles, within
    [-1, 1]) corrects for that; the plain percentile interval would put nearly all its width
    below the point."""
    if point is None or synthetic is None or not rounds:
        return None, None
    common = sorted(set(synthetic) & set(rounds))
    if len(common) < 2:
        return None, None
    ys = np.stack([rounds[d][:, column] for d in common], axis=1)  # (rounds, detectors)
    q_lo, q_hi = percentile_interval(kendall_tau_b_rounds([synthetic[d] for d in common], ys))
    lo, hi = as_float(2 * point - q_hi), as_float(2 * point - q_lo)
    return (None, None) if lo is None or hi is None else (max(-1.0, lo), min(1.0, hi))


def _side(cv_rows: Sequence[Mapping[str, Any]], corpus: str, side: str) -> dict[str, float]:
    """Detector -> its standard score on ``corpus`` in one column of the LOCO rows."""
    return {r["detector"]: float(r[side]) for r in cv_rows
            if r["corpus"] == corpus and r["metric"] == "score_standard" and r[side] is not None}


def pooled_heldout(cv_rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Detector -> its pooled held-out standard score in a LOCO table's rows."""
    return _side(cv_rows, "pooled", "heldout")


def tau_text(v: float | None, lo: float | None = None, hi: float | None = None) -> str:
    """A τ-b for a table or a line: two decimals, its interval in brackets when there is one."""
    if v is None:
        return "–"
    return f"{v:.2f}" if lo is None or hi is None else f"{v:.2f} [{lo:.2f}, {hi:.2f}]"


def heldout_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line: τ-b held out (as run and in-sample beside it), pooled first, then corpus by corpus."""
    pooled = rows[-1]
    per = "; ".join(f"{r['corpus']} {tau_text(r['tau_heldout'])} ({tau_text(r['tau_as_run'])}, "
                    f"{tau_text(r['tau_in_sample'])})" for r in rows[:-1])
    both = ("" if pooled.get("tau_both_heldout") is None else
            f"; both sides held out, the synthetic one leave-one-family-out, "
            f"{tau_text(pooled['tau_both_heldout'], pooled.get('tau_both_heldout_lo'), pooled.get('tau_both_heldout_hi'))}")
    interval = ("" if pooled.get("tau_heldout_lo") is None else
                " (95% bootstrap intervals over the real traces, the synthetic ranking held fixed)")
    rules = pooled.get("rules_held_out") or ""
    how = "thresholds chosen on the other corpora" + (
        f", {', '.join(f'`{d}`' for d in rules.split())} without the rules written from the held-out corpus"
        if rules else "")
    return (f"Held out (leave-one-corpus-out, {how}): Kendall τ-b pooled "
            f"{tau_text(pooled['tau_heldout'], pooled.get('tau_heldout_lo'), pooled.get('tau_heldout_hi'))} "
            f"(as run {tau_text(pooled['tau_as_run'])}, thresholds chosen on all corpora "
            f"{tau_text(pooled['tau_in_sample'])}{both}){interval}; the synthetic pick `{pooled['synthetic_top']}` is "
            f"#{pooled['synthetic_top_rank_heldout']} held out. Per corpus, held out (as run, in-sample): {per}.")


def summary_text(summary: Mapping[str, Any]) -> str:
    """One paragraph a reader can act on."""
    tau = summary["kendall_tau"]
    tau_text = "undefined" if tau is None else f"{tau:.2f}"
    if not summary["detectors"]:
        return "No detector is scored in both runs: nothing to compare."
    same = ("Both put the same detector first" if summary["same_top"] else
            f"The synthetic pick `{summary['top_synthetic']}` is #{summary['top_synthetic_real_rank']} on the real "
            f"run, whose pick `{summary['top_real']}` is #{summary['top_real_synthetic_rank']} on the synthetic run")
    return (f"Kendall τ-b between the two rankings over {summary['detectors']} detectors: {tau_text} "
            f"(1 = the same order, 0 = unrelated, −1 = reversed). {same}.")


def plot_transfer(rows: Sequence[Mapping[str, Any]], path: Path, synthetic_name: str, real_name: str) -> Path | None:
    """Rank on the synthetic run against rank on the real one, one line per detector (a slope chart)."""
    if not rows:
        return None
    from sim.report.plots import palette, plt, save

    colours = palette([r["detector"] for r in rows])
    n = len(rows)
    left, right = _spread(rows, "synthetic_rank"), _spread(rows, "real_rank")
    fig, ax = plt.subplots(figsize=(6.5, 0.32 * n + 1.8))
    for r in rows:
        c = colours[r["detector"]]
        d = r["detector"]
        ax.plot([0, 1], [left[d], right[d]], "-o", color=c, lw=2 if abs(r["rank_change"]) >= 3 else 1)
        ax.text(-0.04, left[d], f"{r['synthetic_rank']}. {d}", ha="right", va="center", fontsize=8)
        ax.text(1.04, right[d], f"{r['real_rank']}. {d}", ha="left", va="center", fontsize=8)
    ax.set_yticks([])
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(n + 0.8, 0.2)
    ax.set_xticks([0, 1], [f"synthetic\n({synthetic_name})", f"real\n({real_name})"])
    ax.set_ylabel("rank by standard score (1 = best, at the top)")
    ax.set_title("Transfer: does the synthetic ranking hold on real traces?")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return save(fig, path)


def _spread(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, float]:
    """Vertical positions: a detector's rank, tied detectors spread apart so their labels stay readable."""
    groups: dict[int, list[str]] = {}
    for r in rows:
        groups.setdefault(r[key], []).append(r["detector"])
    out = {}
    for rank, dets in groups.items():
        for i, d in enumerate(sorted(dets)):
            out[d] = rank + (i - (len(dets) - 1) / 2) * 0.45
    return out
