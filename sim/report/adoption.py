"""Should a guard change be adopted? The project's adoption protocol for any two detectors.

A change to a guard — a new rule, another default, a declaration of what a tool writes — is
run as two detectors over the same suites, ``base`` (as it is) and ``candidate`` (with the
change), and judged the way docs/detectors.md adopts a rule: **on the corpora it was not
derived from**. The caller names the real corpora whose traces the change was written from
(``derived_from``); a gain there is in-sample and proves nothing. What decides:

- **gain elsewhere**: the candidate's standard score minus the base's, paired (the same
  bootstrap rounds), pooled over each real suite's corpora the change was not derived from;
- **nothing worse**: no family, corpus or suite scores lower, and the guard as configured stops
  no more successful runs (``deploy.csv``), on any suite run, derived-from corpora included.

A suite that is for measuring only (``real-heldout-self``: traces nobody wrote a rule from) is
printed beside the others and decides nothing: a verdict that counted it would make it one more
dev half, tuned on like the first.

The verdict is ``adopt`` (a gain elsewhere, nothing worse), ``no gain`` (nothing worse, no
gain where it was not derived from: what a declaration of a tool's documented behaviour may
still be adopted on, docs/detectors.md), ``worse`` (something got worse, or the candidate raised
where the base did not: the table says where) or ``undecided`` (no real dev suite measured it
where it was not derived from). Every figure is printed dev and held out side by side — each suite's corpora marked
as derived from or not — with the deployer's figures beside the scores.

The intervals are the report's stratified cluster bootstrap (episodes resampled within each
family or corpus), so a difference is exactly 0 where the two detectors agree on every episode.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from scenarios.injected_suite import is_injected
from scenarios.realsuite import FAMILIES, MEASURE_ONLY
from scenarios.files import atomic_write
from sim.files import read_table, write_csv, write_json
from sim.numbers import as_float
from sim.report.analysis import load_runs, open_loop_data
from sim.config.spec import DetectorSpec
from sim.report.crossval import POOLED as CV_POOLED, Grid, by_corpus, corpus_cv, corpus_metrics, splits_by_corpus
from sim.report.cv_deploy import SHOWN, heldout_deploy
from sim.scoring.outcomes import load_profiles
from sim.scoring.uncertainty import episode_totals, percentile_interval

BASE, CANDIDATE = "base", "candidate"
POOLED = "pooled"
#: The pooled row over a real suite's corpora the change was not derived from.
ELSEWHERE = "pooled, not derived from"
#: Every real corpus a change can be derived from (the real suites' families).
CORPORA = tuple(sorted(FAMILIES.values()))
METRICS = ("score_standard", "recall", "early_rate", "false_alarm_rate")
COLUMNS = ["suite", "group", "derived", "episodes", "base", "candidate", "diff", "lo", "hi",
           "loco_base", "loco_candidate", "loco_diff", "loco_lo", "loco_hi",
           "base_recall", "candidate_recall", "base_early", "candidate_early", "base_far", "candidate_far"]
LOCO_FIELDS = ("loco_base", "loco_candidate", "loco_diff", "loco_lo", "loco_hi")
#: The deployer's figures compared, from each run's ``deploy.csv``: (action, metric, heading), the
#: held-out deployment table's (``cv_deploy.SHOWN``) but loops caught, which the scores already say.
DEPLOY = tuple((action, metric, heading) for action, metric, heading, _ in SHOWN if metric != "loops_caught")
HEADINGS = {(action, metric): heading for action, metric, heading in DEPLOY}
DEPLOY_COLUMNS = ["suite", "action", "metric", "base", "base_count", "base_of", "candidate", "candidate_count",
                  "candidate_of", "loco_base", "loco_base_count", "loco_base_of", "loco_candidate",
                  "loco_candidate_count", "loco_candidate_of"]
#: The deployment side of a row held out (leave-one-corpus-out), from :func:`heldout_deploy`.
LOCO_DEPLOY_FIELDS = DEPLOY_COLUMNS[9:]


class AdoptionError(ValueError):
    """A run that cannot be compared (one line, for the CLI)."""


@dataclass
class SuiteComparison:
    """One suite's rows (:data:`COLUMNS`) and deployment rows (:data:`DEPLOY_COLUMNS`)."""

    suite: str
    real: bool
    #: The whole suite is traces no rule was written from (``real-heldout-self``).
    held_out: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    deploy: list[dict[str, Any]] = field(default_factory=list)
    #: Detector -> episodes where it raised (``episodes.csv``'s error column): scored as never firing.
    errors: dict[str, int] = field(default_factory=dict)


@dataclass
class Verdict:
    verdict: str  # "adopt", "no gain" or "worse"
    gains: list[dict[str, Any]]  # the rows that decide a gain elsewhere
    worse: list[str]  # what got worse, one phrase each
    #: The pooled rows of the suites held out as a whole: shown with the verdict, not part of it.
    held_out: list[dict[str, Any]] = field(default_factory=list)
    #: On a "no gain" whose scores are the base's everywhere: the deployment figures that moved
    #: (the change is to when the guard stops, a trade the scores do not see).
    halting_moved: list[str] = field(default_factory=list)

    @property
    def adopted(self) -> bool:
        return self.verdict == "adopt"


def check_derived(names: Sequence[str]) -> tuple[str, ...]:
    """The corpora a change was derived from, validated; ``["none"]`` is none."""
    names = [n for n in names if n]
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in CORPORA]
    if not names or unknown:
        raise AdoptionError(f"--derived-from: {'unknown corpus ' + ', '.join(unknown) if unknown else 'empty'} "
                            f"(the real corpora: {', '.join(CORPORA)}; or 'none' for a change written from none)")
    return tuple(dict.fromkeys(names))


def compare_run(run_dir: str | Path, derived_from: Sequence[str], *, rounds: int = 1000, seed: int = 0,
                rule_grids: Callable[[Any], Mapping[str, Grid]] | None = None) -> SuiteComparison:
    """``candidate`` against ``base`` in one run folder holding both (see the module docstring).

    On real traces of two corpora or more each row also gets the leave-one-corpus-out figures
    (``loco_*``: :func:`sim.report.crossval.corpus_cv` with ``base`` the reference, so the
    difference is paired): each threshold chosen on the other corpora and, with ``rule_grids``
    (``sim.tuning.loco.rule_grids``, a callable of the loaded run), each corpus scored without
    the rules its detector declares were written from it — the guard on an agent nobody read.
    """
    data = load_runs([run_dir])
    missing = [d for d in (BASE, CANDIDATE) if d not in data.detectors]
    if missing:
        raise AdoptionError(f"{run_dir}: no detector labelled {' or '.join(missing)} in this run")
    cfg = data.manifests[0].get("config", {})
    suite = str(cfg.get("suite", "?"))
    real = bool(cfg.get("real")) or is_injected(suite) or suite == "replay"
    if real:
        data = by_corpus(data)
    if not len(data.outcomes):
        raise AdoptionError(f"{run_dir}: no open-loop outcomes (episodes.csv) to compare")
    ol = open_loop_data(data, rounds, seed, family_text=True, detectors=[BASE, CANDIDATE])
    groups = list(ol.boot.groups)
    _, profiles = load_profiles()
    held_out = suite in MEASURE_ONLY
    derived = [real and not held_out and g in derived_from for g in groups]
    # Per detector, totals per group: point (G, k) and rounds (R, G, k); then the pooled rows.
    totals = {}
    for det in (BASE, CANDIDATE):
        point, per_round = ol.boot.family_totals(episode_totals(ol.by_det[det], ol.index, data.delta))
        pools = [(POOLED, point.sum(axis=0), per_round.sum(axis=1))]
        if real:
            keep = np.asarray([not d for d in derived])
            pools.append((ELSEWHERE, point[keep].sum(axis=0), per_round[:, keep].sum(axis=1)))
        totals[det] = (point, per_round, pools)
    # Episodes scored (a trace without a usable label counts nowhere), per group.
    o = data.outcomes
    scored = o[(o["detector"] == BASE) & (o["outcome"].astype(str) != "unlabelled")]
    sizes = {g: int(scored[scored["family"].astype(str) == g]["episode"].nunique()) for g in groups}
    out = SuiteComparison(suite, real, held_out)
    for det in (BASE, CANDIDATE):
        errs = o[(o["detector"] == det) & o["error"].notna() & (o["error"].astype(str) != "")]
        out.errors[det] = int(errs["episode"].nunique())

    def add(group: str, derived_mark: str, n: int, tb, rb, tc, rc) -> None:
        mb, mc = corpus_metrics(tb, profiles), corpus_metrics(tc, profiles)
        rmb, rmc = corpus_metrics(rb, profiles), corpus_metrics(rc, profiles)
        lo, hi = percentile_interval(rmc["score_standard"] - rmb["score_standard"])
        out.rows.append({"suite": suite, "group": group, "derived": derived_mark, "episodes": n,
                         "base": as_float(mb["score_standard"]), "candidate": as_float(mc["score_standard"]),
                         "diff": as_float(mc["score_standard"] - mb["score_standard"]),
                         "lo": as_float(lo), "hi": as_float(hi), **dict.fromkeys(LOCO_FIELDS),
                         "base_recall": as_float(mb["recall"]), "candidate_recall": as_float(mc["recall"]),
                         "base_early": as_float(mb["early_rate"]), "candidate_early": as_float(mc["early_rate"]),
                         "base_far": as_float(mb["false_alarm_rate"]), "candidate_far": as_float(mc["false_alarm_rate"])})

    (pb, rb, pools_b), (pc, rc, pools_c) = totals[BASE], totals[CANDIDATE]
    for gi, g in enumerate(groups):
        mark = ("derived" if derived[gi] else "held out" if held_out else "not derived") if real else ""
        add(g, mark, sizes[g], pb[gi], rb[:, gi], pc[gi], rc[:, gi])
    n_all = sum(sizes.values())
    for (name, tb, rtb), (_, tc, rtc) in zip(pools_b, pools_c):
        if name == ELSEWHERE:
            n = sum(sizes[g] for gi, g in enumerate(groups) if not derived[gi])
            if n == 0 or not any(derived):  # no corpus left, or the same as the pooled row
                continue
            add(name, "not derived", n, tb, rtb, tc, rtc)
        else:
            add(name, "", n_all, tb, rtb, tc, rtc)
    out.deploy = _deploy_rows(Path(run_dir), suite)
    if real and splits_by_corpus(data):
        _add_loco(out, data, rounds, seed, rule_grids)
    return out


def _add_loco(out: SuiteComparison, data, rounds: int, seed: int,
              rule_grids: Callable[[Any], Mapping[str, Grid]] | None) -> None:
    grids = dict(rule_grids(data)) if rule_grids is not None else None
    cv = corpus_cv(data, rounds=rounds, seed=seed, reference=BASE, detectors=[BASE, CANDIDATE], grids=grids)
    for r in out.rows:
        b, c = cv.get(BASE, r["group"]), cv.get(CANDIDATE, r["group"])
        if b is None or c is None:  # the pooled row over the corpora not derived from: none held out
            continue
        r.update(loco_base=b["heldout"], loco_candidate=c["heldout"], loco_diff=c["vs_reference"],
                 loco_lo=c["vs_reference_lo"], loco_hi=c["vs_reference_hi"])
    # The deployment figures held out: each corpus's alarms at its held-out threshold, without its rules.
    held, _ = heldout_deploy(data, cv, grids, lambda d: DetectorSpec(d, *data.specs[d]).build(), rounds=rounds, seed=seed,
                             detectors=[BASE, CANDIDATE])
    pooled = {(h["detector"], h["action"], h["metric"]): h for h in held if h["corpus"] == CV_POOLED}
    for d in out.deploy:
        for det in (BASE, CANDIDATE):
            h = pooled.get((det, d["action"], d["metric"]))
            if h is not None and h["heldout"] is not None:
                d.update({f"loco_{det}": h["heldout"], f"loco_{det}_count": h["heldout_count"],
                          f"loco_{det}_of": h["heldout_of"]})


def _deploy_rows(run_dir: Path, suite: str) -> list[dict[str, Any]]:
    d = read_table(run_dir / "deploy.csv")
    if d.empty:
        return []
    rows = []
    for action, metric, _ in DEPLOY:
        got = {det: d[(d["detector"] == det) & (d["action"] == action) & (d["metric"] == metric)] for det in (BASE, CANDIDATE)}
        if any(g.empty or pd.isna(g["value"].iloc[0]) for g in got.values()):
            continue
        row: dict[str, Any] = {"suite": suite, "action": action, "metric": metric, **dict.fromkeys(LOCO_DEPLOY_FIELDS)}
        for det, g in got.items():
            r = g.iloc[0]
            row[det] = float(r["value"])
            row[f"{det}_count"] = None if pd.isna(r["count"]) else int(r["count"])
            row[f"{det}_of"] = None if pd.isna(r["of"]) else int(r["of"])
        rows.append(row)
    return rows


def decide(suites: Sequence[SuiteComparison], tolerance: float = 0.0) -> Verdict:
    """The verdict (module docstring): ``tolerance`` points of score a group may lose before it
    counts as worse (0: any loss on these traces)."""
    gains, worse, held_out = [], [], []
    for s in suites:
        if s.errors.get(CANDIDATE, 0) > s.errors.get(BASE, 0):
            worse.append(f"{s.suite}: the candidate raised in {s.errors[CANDIDATE]} episodes "
                         f"(the base in {s.errors.get(BASE, 0)}; episodes.csv's error column)")
        if s.held_out:
            held_out += [r for r in s.rows if r["group"] == POOLED]
            continue
        for r in s.rows:
            where = s.suite if r["group"] == POOLED else f"{s.suite} {r['group']}"
            if r["diff"] is not None and r["diff"] < -tolerance:
                worse.append(f"{where} {_points(r['diff'])}")
            if r.get("loco_diff") is not None and r["loco_diff"] < -tolerance:
                worse.append(f"{where} held out (leave-one-corpus-out) {_points(r['loco_diff'])}")
            if s.real and (r["group"] == ELSEWHERE or (r["group"] == POOLED and not any(
                    x["derived"] == "derived" for x in s.rows))):
                gains.append(r)
        for d in s.deploy:
            if d["metric"] != "successes_stopped" or d["action"] != "configured":
                continue
            if d[CANDIDATE] > d[BASE]:
                worse.append(f"{s.suite}: successful runs stopped as configured {d['base_count']} -> "
                             f"{d['candidate_count']} of {d['candidate_of']}")
            if d.get("loco_candidate") is not None and d.get("loco_base") is not None and d["loco_candidate"] > d["loco_base"]:
                worse.append(f"{s.suite}: successful runs stopped as configured, held out (leave-one-corpus-out) "
                             f"{d['loco_base_count']} -> {d['loco_candidate_count']} of {d['loco_candidate_of']}")
    if worse:
        return Verdict("worse", gains, worse, held_out)
    if not gains:  # no real dev suite, or every corpus run was one the change came from
        return Verdict("undecided", gains, [], held_out)
    if any(g["diff"] is not None and g["diff"] > 0 for g in gains):
        return Verdict("adopt", gains, [], held_out)
    return Verdict("no gain", gains, [], held_out, _halting_moved(suites))


def _halting_moved(suites: Sequence[SuiteComparison]) -> list[str]:
    """The deployment figures that moved, when no score moved anywhere (else: [])."""
    if any(r.get(k) not in (None, 0) for s in suites for r in s.rows for k in ("diff", "loco_diff")):
        return []
    moved = []
    for s in suites:
        for d in s.deploy:
            if d[BASE] != d[CANDIDATE]:
                heading = HEADINGS[d["action"], d["metric"]]
                moved.append(f"`{s.suite}` {heading} {_deploy_cell(d, BASE)} → {_deploy_cell(d, CANDIDATE)}")
    return moved


def _points(d: float) -> str:
    """A score difference, with the digits that show it is not 0."""
    return f"{d:+.1f}" if abs(d) >= 0.05 else f"{d:+.2g}"


def _num(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _diff(r: dict[str, Any], prefix: str = "") -> str:
    d, lo, hi = r[prefix + "diff"], r[prefix + "lo"], r[prefix + "hi"]
    if d is None:
        return "–"
    excl = lo is not None and (lo > 0 or hi < 0)
    return f"{d:+.1f} [{_num(lo)}, {_num(hi)}]" + (" ≠0" if excl else "")


def _deploy_cell(row: dict[str, Any], det: str) -> str:
    """``det``: ``base`` or ``candidate``, or either with ``loco_`` before it (held out)."""
    if row.get(det) is None:
        return "–"
    if row["metric"] == "nudges_per_100_clean":
        return f"{row[det]:.2f}"
    if row["metric"] == "successes_stopped":
        return f"{row[f'{det}_count']} of {row[f'{det}_of']}"
    return f"{100 * row[det]:.1f} %"


def adoption_text(suites: Sequence[SuiteComparison], verdict: Verdict, derived_from: Sequence[str],
                  compared: Mapping[str, Any] | None = None) -> str:
    """The comparison as markdown: what was compared, per suite its groups (dev and held out side
    by side), the deployer's figures, then the verdict."""
    lines = [f"# Adopt `candidate` over `base`? (derived from: {', '.join(derived_from) or 'none'})", ""]
    for key, value in (compared or {}).items():
        lines.append(f"- {key}: `{value}`" if not isinstance(value, (list, tuple)) else
                     f"- {key}: " + (", ".join(f"`{v}`" for v in value) or "none"))
    if compared:
        lines.append("")
    for s in suites:
        kind = ("real, held out as a whole: measured beside the others, it decides nothing" if s.held_out else
                "real: each corpus derived from or not" if s.real else "synthetic")
        loco = any(r.get("loco_diff") is not None for r in s.rows)
        lines += [f"## `{s.suite}` ({kind})", ""]
        if loco:
            lines += ["Leave-one-corpus-out: each corpus scored at thresholds chosen on the others, and without the "
                      "rules its detector declares were written from it.", ""]
        lines += ["| family / corpus | | episodes | base | candidate | candidate − base [95 %] | "
                  + ("leave-one-corpus-out: base → candidate, difference | " if loco else "") + "recall | early | FAR |",
                  "|---|---|---|---|---|---|" + ("---|" if loco else "") + "---|---|---|"]
        shown = [r for r in s.rows if r["group"] in (POOLED, ELSEWHERE) or r["diff"] != 0 or s.real]
        for r in shown:
            held = (f"{_num(r['loco_base'])} → {_num(r['loco_candidate'])}, {_diff(r, 'loco_')} | "
                    if r.get("loco_diff") is not None else "– | ") if loco else ""
            lines.append(f"| {r['group']} | {r['derived']} | {r['episodes']} | {_num(r['base'])} | {_num(r['candidate'])} | "
                         f"{_diff(r)} | {held}{_num(r['base_recall'], 3)} → {_num(r['candidate_recall'], 3)} | "
                         f"{_num(r['base_early'], 3)} → {_num(r['candidate_early'], 3)} | "
                         f"{_num(r['base_far'], 3)} → {_num(r['candidate_far'], 3)} |")
        if any(s.errors.values()):
            lines.append(f"\nRaised in episodes (scored as never firing there): base {s.errors.get(BASE, 0)}, "
                         f"candidate {s.errors.get(CANDIDATE, 0)}.")
        hidden = len(s.rows) - len(shown)
        if hidden:
            lines.append(f"\n{hidden} families unchanged (difference 0) are not shown; adoption.csv has every row.")
        if s.deploy:
            held = any(d.get("loco_base") is not None for d in s.deploy)
            lines += ["", "| in a deployer's terms | base | candidate |"
                      + (" base, leave-one-corpus-out | candidate, leave-one-corpus-out |" if held else ""),
                      "|---|---|---|" + ("---|---|" if held else "")]
            for d in s.deploy:
                heading = HEADINGS[d["action"], d["metric"]]
                lines.append(f"| {heading} | {_deploy_cell(d, BASE)} | {_deploy_cell(d, CANDIDATE)} |"
                             + (f" {_deploy_cell(d, 'loco_' + BASE)} | {_deploy_cell(d, 'loco_' + CANDIDATE)} |"
                                if held else ""))
        lines.append("")
    lines.append("## Verdict")
    lines.append("")
    if verdict.gains:
        lines.append("Where the change was not derived from: " + "; ".join(
            f"`{g['suite']}` {g['group']} {_diff(g)}" for g in verdict.gains) + ".")
    else:
        lines.append("No real dev suite was run, or every corpus run was one the change was derived from: nothing "
                     "measures it where it was not derived from.")
    if verdict.held_out:
        lines.append("")
        lines.append("Held out, for measuring only (it decides nothing): " + "; ".join(
            f"`{r['suite']}` {_diff(r)}" for r in verdict.held_out) + ".")
    lines.append("")
    if verdict.verdict == "worse":
        lines.append("**Not adopted: worse on** " + "; ".join(verdict.worse) + ".")
    elif verdict.verdict == "undecided":
        lines.append("**Not adopted: nothing decides.** No real dev suite (`real-dev`, `real-injected`, a replay of "
                     "your traces) measured it on a corpus it was not derived from; `real-heldout-self` is for "
                     "measuring only. Add one to --suites.")
    elif verdict.verdict == "adopt":
        positive = [g for g in verdict.gains if g["diff"] is not None and g["diff"] > 0]
        sure = sum(1 for g in positive if g["lo"] is not None and g["lo"] > 0)
        lines.append("**Adopt**: it gains where it was not derived from, and no suite the verdict reads (all but "
                     "`real-heldout-self`) is worse by more than the tolerance, as run or held out"
                     + ("." if sure == len(positive) else
                        " (as a point estimate: " + ("no" if sure == 0 else "not every") + " gain's interval excludes 0)."))
    elif verdict.halting_moved:
        lines.append("**Not adopted: no score moves anywhere; what moves is when the guard stops**: "
                     + "; ".join(verdict.halting_moved) + ". That is a trade between successful runs stopped and "
                     "failed-run calls saved, which no score weighs: `loopbench tune --objective deploy` picks when "
                     "to halt under a cap on successful runs stopped (docs/tuning.md).")
    else:
        lines.append("**Not adopted: no gain where it was not derived from**, and nothing worse. A declaration "
                     "of a tool's documented behaviour is adopted on that (docs/detectors.md); a rule is not.")
    return "\n".join(lines) + "\n"


def write_adoption(out: Path, suites: Sequence[SuiteComparison], verdict: Verdict, derived_from: Sequence[str],
                   compared: Mapping[str, Any] | None = None) -> str:
    """``adoption.csv``, ``adoption_deploy.csv``, ``adoption.md`` and ``adoption.json`` in ``out``
    (``compared``: what was compared, e.g. the two specs and their parameters); the markdown."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "adoption.csv", [r for s in suites for r in s.rows], COLUMNS)
    write_csv(out / "adoption_deploy.csv", [r for s in suites for r in s.deploy], DEPLOY_COLUMNS)
    text = adoption_text(suites, verdict, derived_from, compared)
    atomic_write(out / "adoption.md", text)
    write_json(out / "adoption.json", verdict_json(verdict, derived_from, compared))
    return text


def verdict_json(verdict: Verdict, derived_from: Sequence[str], compared: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"verdict": verdict.verdict, "adopted": verdict.adopted, "derived_from": list(derived_from),
            "compared": dict(compared or {}),
            "worse": verdict.worse,
            "gains": [{k: g[k] for k in ("suite", "group", "diff", "lo", "hi")} for g in verdict.gains],
            "held_out": [{k: g[k] for k in ("suite", "group", "diff", "lo", "hi")} for g in verdict.held_out],
            "halting_moved": verdict.halting_moved}
