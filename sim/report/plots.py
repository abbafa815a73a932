"""The report's PNG plots, drawn from an :class:`sim.report.analysis.Analysis` (matplotlib, Agg).

Every plot has a title, axis labels with units and a legend, and a detector keeps one
colour in every plot and every run (:func:`palette`).
"""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Callable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from scenarios.base import healthy_families, loop_families  # noqa: E402
from sim.files import save_figure  # noqa: E402
from sim.forking import default_workers, map_forked  # noqa: E402
from sim.numbers import as_bool  # noqa: E402

DPI = 110


def palette(names: Sequence[str]) -> dict[str, tuple]:
    """Detector name -> colour, the same in every plot and run.

    Registered detectors are sorted and take the tab20 colours in turn, so a detector's
    colour does not depend on which others a run includes; other labels (``label=spec``,
    ``module:Class``) get a colour from a stable hash of their name.
    """
    try:
        from detectors.registry import available

        known = sorted(available())
    except Exception:  # noqa: BLE001 — a broken plug-in must not stop a report
        known = []
    cmap = plt.get_cmap("tab20")
    out = {}
    for n in names:
        i = known.index(n) if n in known else zlib.crc32(n.encode()) % 20
        out[n] = cmap(i % 20)
    return out


def save(fig, path: Path) -> Path:
    """Write ``fig`` as the report's PNG (atomically, at the report's DPI) and close it."""
    save_figure(fig, path, DPI)
    plt.close(fig)
    return path


def _ordered(an) -> list[str]:
    """Detectors by standard score (best first), as in the scoreboard."""
    iv = pd.DataFrame(an.intervals)
    if not len(iv):
        return list(an.data.detectors)
    s = iv[(iv.family == "all") & (iv.metric == "score_standard")].set_index("detector")["value"]
    return sorted(an.data.detectors, key=lambda d: -s.get(d, -1e9))


def _families(an) -> tuple[list[str], list[str]]:
    out = an.data.outcomes
    if not len(out):  # a closed-loop-only run scores no open-loop outcomes
        return [], []
    fams = sorted(set(out["family"]))
    looping = sorted(set(out[out["outcome"].isin(["tp", "miss", "early"])]["family"]))
    clean = sorted(set(out[out["outcome"].isin(["tn", "fp"])]["family"]))
    # Suite order (loop families first), then families the registry does not know (replayed traces).
    order = list(dict.fromkeys([f for f in loop_families() + healthy_families() if f in fams] + fams))
    return [f for f in order if f in looping], [f for f in order if f in clean]


def _heatmap(an, metric: str, families: list[str], title: str, cbar: str, path: Path, cmap: str) -> Path | None:
    if not families:
        return None
    iv = pd.DataFrame(an.intervals)
    dets = _ordered(an)
    sel = iv[iv.metric == metric].set_index(["detector", "family"])["value"]
    grid = np.array([[sel.get((d, f), np.nan) for f in families] for d in dets], dtype=float)
    fig, ax = plt.subplots(figsize=(2.6 + 0.62 * len(families), 1.4 + 0.36 * len(dets)))
    im = ax.imshow(100 * grid, cmap=cmap, vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(families)), families, rotation=40, ha="right", fontsize=9)
    ax.set_yticks(range(len(dets)), dets, fontsize=9)
    for (i, j), v in np.ndenumerate(grid):
        if v == v:
            ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=7,
                    color="white" if v > 0.6 else "black")
    ax.set_xlabel("scenario family")
    ax.set_ylabel("detector (best standard score first)")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label=cbar, fraction=0.03, pad=0.02)
    return save(fig, path)


def plot_misses(an, path: Path) -> Path | None:
    loops, _ = _families(an)
    return _heatmap(an, "miss_rate", loops, f"Missed loops per family (halt at first alarm, Δ = {an.data.delta})",
                    "miss rate (%) — lower is better", path, "Reds")


def plot_false_alarms(an, path: Path) -> Path | None:
    _, clean = _families(an)
    return _heatmap(an, "false_alarm_rate", clean, "False alarms on clean episodes per family",
                    "false-alarm rate (%) — lower is better", path, "Oranges")


MARKERS = {"default": ("o", "default (as run)"), "calibrated@5%": ("^", "calibrated @5% FAR"),
           "calibrated_heldout": ("s", "calibrated, held-out families"), "oracle": ("*", "oracle (upper bound)")}


def _tradeoff(an, ykey: str, ylabel: str, title: str, path: Path, ypct: bool) -> Path | None:
    curves = pd.DataFrame(an.curves)
    if not len(curves):
        return None
    th = pd.DataFrame(an.thresholds)
    dets = [d for d in _ordered(an) if d in set(curves.detector)]
    colours = palette(an.data.detectors)
    ncol = 4 if len(dets) > 6 else max(1, min(3, len(dets)))
    nrow = int(np.ceil(len(dets) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 2.9 * nrow), squeeze=False)
    scale = 100.0 if ypct else 1.0
    for ax, det in zip(axes.flat, dets):
        c = curves[curves.detector == det].sort_values("value")
        ax.plot(100 * c["far"], scale * c[ykey], "-", color=colours[det], lw=1.6, marker=".", ms=4)
        for kind, (m, _) in MARKERS.items():
            r = th[(th.detector == det) & (th.kind == kind)]
            if len(r) and pd.notna(r.iloc[0]["far"]):
                y = r.iloc[0][{"miss_rate": "miss_rate", "median_delay": "median_delay"}[ykey]]
                if pd.notna(y):
                    ax.plot(100 * r.iloc[0]["far"], scale * y, m, ms=9 if m == "*" else 7, mfc="none" if m != "*" else "gold",
                            mec="black", mew=1.2, zorder=5)
        ax.set_title(f"{det} ({c['param'].iloc[0]})", fontsize=9)
        ax.set_xlim(-3, 103)
        # Same y range in every panel so detectors compare at a glance; a median delay is at most Δ.
        ax.set_ylim(*((-3, 103) if ypct else (-0.3, an.data.delta + 0.3)))
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    for ax in axes.flat[len(dets):]:
        ax.axis("off")
    for ax in axes.flat[max(0, len(dets) - ncol):len(dets)]:  # the lowest panel of every column
        ax.set_xlabel("false-alarm rate on clean episodes (%)", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    handles = [plt.Line2D([], [], color="grey", marker=".", lw=1.6, label="threshold sweep (one point per value)")]
    handles += [plt.Line2D([], [], ls="", marker=m, mfc="none" if m != "*" else "gold", mec="black", ms=8, label=lab)
                for m, lab in MARKERS.values()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, bbox_to_anchor=(0.5, -0.02), frameon=False)
    fig.suptitle(title, y=1.0)
    fig.tight_layout(rect=(0, 0.04, 1, 0.98))
    return save(fig, path)


def plot_tradeoff_miss(an, path: Path) -> Path | None:
    return _tradeoff(an, "miss_rate", "miss rate (%)", "Trade-off over each detector's threshold: false alarms vs misses",
                     path, True)


def plot_tradeoff_delay(an, path: Path) -> Path | None:
    return _tradeoff(an, "median_delay", "median delay (calls after onset)",
                     "Trade-off over each detector's threshold: false alarms vs detection delay", path, False)


def plot_delays(an, path: Path) -> Path | None:
    out = an.data.outcomes
    if not len(out):
        return None
    delta = an.data.delta
    dets = _ordered(an)
    loops = out[out["outcome"].isin(["tp", "miss", "early"])]
    if not len(loops):
        return None
    cats = [f"caught, delay {d}" for d in range(delta + 1)] + ["fired after the window (late)", "never fired", "early (before onset)"]
    cmap = plt.get_cmap("viridis")
    colours = [cmap(0.15 + 0.8 * d / max(delta, 1)) for d in range(delta + 1)] + ["#8c8c8c", "#d9d9d9", "#d62728"]
    shares = np.zeros((len(dets), len(cats)))
    for i, d in enumerate(dets):
        g = loops[loops.detector == d]
        n = len(g)
        if not n:
            continue
        tp = g[g.outcome == "tp"]["delay"].astype(int)
        for k in range(delta + 1):
            shares[i, k] = (tp == k).sum() / n
        late = g["late"].map(lambda v: as_bool(v) is True)
        shares[i, delta + 1] = ((g.outcome == "miss") & late).sum() / n
        shares[i, delta + 2] = ((g.outcome == "miss") & ~late).sum() / n
        shares[i, delta + 3] = (g.outcome == "early").sum() / n
    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.36 * len(dets)))
    left = np.zeros(len(dets))
    for k, (cat, col) in enumerate(zip(cats, colours)):
        ax.barh(range(len(dets)), 100 * shares[:, k], left=100 * left, color=col, label=cat, edgecolor="white", lw=0.4)
        left += shares[:, k]
    ax.set_yticks(range(len(dets)), dets, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of looping paths (%)")
    ax.set_title(f"Detection delay: when each detector first fires on a looping path (window Δ = {delta} calls)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="outcome", title_fontsize=8)
    return save(fig, path)


def _ci(an, metric: str, rows=None) -> pd.DataFrame:
    iv = pd.DataFrame(rows if rows is not None else an.intervals)
    if not len(iv):
        return iv
    return iv[(iv.family == "all") & (iv.metric == metric)].set_index("detector")


def plot_cost(an, path: Path) -> Path | None:
    t = an.data.timings
    if not len(t):
        return None
    t = t[t["mode"] == "open"].groupby("detector")["p50_us"].median()
    s = _ci(an, "score_standard")
    dets = [d for d in _ordered(an) if d in t.index and d in s.index and t[d] > 0]
    if not dets:
        return None
    colours = palette(an.data.detectors)
    fig, ax = plt.subplots(figsize=(9.5, 5.5))
    for d in dets:
        r = s.loc[d]
        ax.errorbar(t[d], r["value"], yerr=[[r["value"] - r["lo"]], [r["hi"] - r["value"]]], fmt="o", ms=7,
                    color=colours[d], ecolor=colours[d], elinewidth=1.2, capsize=3, label=d)
    ax.set_xscale("log")
    lo, hi = min(t[d] for d in dets), max(t[d] for d in dets)
    ax.set_xlim(lo / 1.6, hi * 3.0)  # room for the names on the right
    _label_points(ax, [(d, t[d], float(s.loc[d, "value"])) for d in dets])
    ax.set_xlabel("detector time per check, p50 (µs, log scale; measured, varies by machine)")
    ax.set_ylabel("composite score, standard profile (0 = never fires, 100 = perfect)")
    ax.set_title("Cost against quality (bars: 95% bootstrap interval of the score)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="detector", title_fontsize=8)
    return save(fig, path)


def _label_points(ax, points: list[tuple[str, float, float]], fontsize: int = 7) -> None:
    """Name each point, trying four spots around it and keeping the first that overlaps no earlier name."""
    fig = ax.figure
    fig.canvas.draw()
    px_per_pt = fig.dpi / 72.0
    taken: list[tuple[float, float, float, float]] = []
    for _, x, y in points:  # the markers themselves
        px, py = ax.transData.transform((x, y))
        r = 4 * px_per_pt
        taken.append((px - r, py - r, px + r, py + r))
    spots = [(6, 3, "left"), (6, -11, "left"), (-6, 3, "right"), (-6, -11, "right"), (6, 13, "left"),
             (-6, 13, "right"), (6, -21, "left"), (-6, -21, "right"), (6, 23, "left"), (-6, -31, "right")]
    for name, x, y in sorted(points, key=lambda p: -p[2]):
        px, py = ax.transData.transform((x, y))
        w, h = 0.6 * fontsize * len(name) * px_per_pt, 1.2 * fontsize * px_per_pt
        for dx, dy, ha in spots:
            x0 = px + dx * px_per_pt - (w if ha == "right" else 0)
            box = (x0, py + dy * px_per_pt, x0 + w, py + dy * px_per_pt + h)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken):
                break
        taken.append(box)
        ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, ha=ha,
                    va="bottom", color="#333333")


def plot_scores(an, path: Path) -> Path | None:
    s = _ci(an, "score_standard")
    if not len(s):
        return None
    dets = [d for d in _ordered(an) if d in s.index]
    colours = palette(an.data.detectors)
    fig, ax = plt.subplots(figsize=(8.5, 1.4 + 0.36 * len(dets)))
    for i, d in enumerate(dets):
        r = s.loc[d]
        ax.errorbar(r["value"], i, xerr=[[r["value"] - r["lo"]], [r["hi"] - r["value"]]], fmt="o", color=colours[d],
                    capsize=3, ms=7, label=d)
    ax.axvline(0, color="black", lw=0.8, ls=":")
    ax.set_yticks(range(len(dets)), dets, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("composite score, standard profile (0 = never fires, 100 = perfect)")
    ax.set_title(f"Scoreboard with 95% intervals ({an.rounds} bootstrap rounds over episodes, stratified by family)")
    ax.grid(alpha=0.3, axis="x")
    return save(fig, path)


def plot_closed(an, path: Path) -> Path | None:
    if not an.closed_intervals:
        return None
    succ = _ci(an, "success_rate", an.closed_intervals)
    spend = _ci(an, "wasted_spend_per_episode", an.closed_intervals)
    dets = sorted(succ.index, key=lambda d: -succ.loc[d, "value"])
    colours = palette(an.data.detectors or list(succ.index))
    fig, axes = plt.subplots(1, 2, figsize=(12, 1.5 + 0.36 * len(dets)), sharey=True)
    for ax, df, scale, label in ((axes[0], succ, 100.0, "task success (% of episodes)"),
                                 (axes[1], spend, 1.0, "simulated spend wasted inside loops ($ per episode)")):
        for i, d in enumerate(dets):
            r = df.loc[d]
            ax.barh(i, scale * r["value"], color=colours.get(d, "grey"), alpha=0.85)
            ax.errorbar(scale * r["value"], i, xerr=[[scale * (r["value"] - r["lo"])], [scale * (r["hi"] - r["value"])]],
                        fmt="none", ecolor="black", capsize=3, lw=1)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3, axis="x")
    axes[0].set_yticks(range(len(dets)), dets, fontsize=9)
    axes[0].invert_yaxis()
    axes[0].set_title("Task success (higher is better)")
    axes[1].set_title("Wasted spend (lower is better)")
    fig.suptitle("Closed loop: the detector's verdicts change the run (bars: 95% bootstrap interval)")
    fig.tight_layout()
    return save(fig, path)


def plot_delta(an, path: Path) -> Path | None:
    d = pd.DataFrame(an.delta_rows)
    if not len(d):
        return None
    colours = palette(an.data.detectors)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for det in _ordered(an):
        g = d[d.detector == det].sort_values("delta")
        if not len(g):
            continue
        axes[0].plot(g["delta"], 100 * g["miss_rate"], marker="o", ms=3, color=colours[det], label=det)
        axes[1].plot(g["delta"], g["score_standard"], marker="o", ms=3, color=colours[det], label=det)
    for ax in axes:
        ax.axvline(an.data.delta, color="black", ls=":", lw=1)
        ax.set_xlabel("detection window Δ (calls after the onset that still count as caught)")
        ax.set_xticks(sorted(d["delta"].unique()))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("miss rate (%)")
    axes[0].set_title("Misses at other windows (dotted: the run's Δ)")
    axes[1].set_ylabel("composite score, standard profile")
    axes[1].set_title("Composite score at other windows")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="detector", title_fontsize=8)
    fig.suptitle("Δ sensitivity: outcomes re-scored from the stored per-call verdicts (no re-run)")
    fig.tight_layout()
    return save(fig, path)


#: (file name, heading, what it shows, plotting function), in report order.
PLOTS: list[tuple[str, str, str, Callable]] = [
    ("scores.png", "Scoreboard with intervals", "Standard composite score per detector with its 95% bootstrap interval.", plot_scores),
    ("misses_by_family.png", "Misses per family", "Miss rate (%) of every detector on every loop family.", plot_misses),
    ("false_alarms_by_family.png", "False alarms per family", "False-alarm rate (%) on the clean episodes of every family.", plot_false_alarms),
    ("tradeoff_far_miss.png", "Trade-off: false alarms vs misses", "Each detector's threshold swept from stored scores; default, calibrated and oracle points marked.", plot_tradeoff_miss),
    ("tradeoff_far_delay.png", "Trade-off: false alarms vs delay", "The same sweep against median detection delay.", plot_tradeoff_delay),
    ("delays.png", "Delay distribution", "Where each detector first fires on a looping path: delay after the onset, late, never, or early.", plot_delays),
    ("cost_vs_score.png", "Cost against quality", "Median time per check (log scale) against the standard score.", plot_cost),
    ("closed_loop.png", "Closed loop", "Task success and wasted spend when the detector's verdicts change the run.", plot_closed),
    ("delta_sensitivity.png", "Δ sensitivity", "Miss rate and score re-scored at other detection windows.", plot_delta),
]


_ANALYSIS = None  # what forked plot workers draw from (set before they fork)


def _draw(index: int, plot_dir: str) -> tuple[str | None, str | None]:
    name, _, _, fn = PLOTS[index]
    try:
        p = fn(_ANALYSIS, Path(plot_dir) / name)
    except Exception as exc:  # noqa: BLE001 — one broken plot must not lose the others
        plt.close("all")
        return None, f"plot {name} failed: {type(exc).__name__}: {exc}"
    return (str(p) if p is not None else None), None


def write_plots(an, plot_dir: Path, log: Callable[[str], None] = lambda s: None,
                workers: int = 0) -> list[tuple[str, str, str, Path]]:
    """Draw every plot into ``plot_dir``; a plot that fails is reported and skipped.

    The plots are independent and drawing them is most of a report's time, so they are
    spread over forked processes (``workers``: 0 = one per core, 1 = in this process).
    """
    global _ANALYSIS
    n = min(workers or default_workers(), len(PLOTS))
    _ANALYSIS = an
    try:
        drawn = map_forked(_draw, [(i, str(plot_dir)) for i in range(len(PLOTS))], n)
    finally:
        _ANALYSIS = None
    done = []
    for (name, heading, caption, _), (path, error) in zip(PLOTS, drawn):
        if error is not None:
            log(error)
        elif path is not None:
            done.append((name, heading, caption, Path(path)))
    return done
