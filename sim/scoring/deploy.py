"""The deployment view (SPEC §11): what a guard does to runs when it halts or nudges.

Computed from a run folder's ``episodes.csv`` and ``calls.csv`` alone (``closed.csv`` only as
a source of run outcomes for synthetic episodes), per detector and per action:

- **halt** at the first alarm: successful runs stopped, failed runs stopped, calls (and tokens,
  where ``calls.csv`` records them) saved on failed runs — the calls of failed runs from the
  first alarm on (the alarmed call is refused, so it is saved too) over all calls of failed
  runs — and loops / runaway loops caught (the scorer's TP: first alarm within Δ of the onset);
- **nudge** at every alarm: blips and runaway loops nudged (an alarm within Δ of the onset) and
  nudges per 100 clean calls (alarms on calls not labelled as loops, every call scored);
- **configured**, the guard as it was run: its ``stop`` / ``escalate`` verdicts halt the run, a
  ``nudge`` or a refused (``prune``) call lets it go on — the halt figures of that policy, a
  loop counted caught when the first halt falls within Δ of its onset. A guard that nudges
  first is judged here on what it would do, not on a halt it never makes.

The **label oracle** (``label_oracle``, a reference like the closed loop's ``no_guard``) halts at
the k-th call the labels mark redundant (k = 1: at the onset): what the labels themselves allow.
A cap on successful runs stopped that the oracle cannot meet with a given saving is a cap no
loop guard meets either — its runs contain labelled loops the agent recovered from.

A run's outcome (success / failure / unknown) is read from ``episodes.csv`` (column
``run_outcome``, or ``outcome`` when it holds outcomes rather than the scorer's tn/fp/tp/…);
a loop's severity from its ``severity`` column (runaway / blip). Missing columns mean unknown:
figures that need them are left empty with a note, never printed as measured zeros. For
synthetic episodes played in closed loop the world knows success: a detector that let every
call of an episode through played it exactly unguarded, so its ``closed.csv`` row is the
unguarded outcome of the open-loop episode.

Intervals come from the report's stratified cluster bootstrap (:mod:`sim.scoring.uncertainty`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from scenarios.outcome import FAILURE, OUTCOMES, SUCCESS, UNKNOWN
from scenarios.severity import BLIP, RUNAWAY, Severity
from sim.files import read_table, write_csv
from sim.numbers import as_bool, as_float
from sim.scoring.outcomes import DELTA
from sim.scoring.thresholds import HALTING_VERDICTS
from sim.scoring.uncertainty import LEVEL, ROUNDS, SEED, Bootstrap, percentile_interval

DEPLOY_COLUMNS = ["detector", "action", "metric", "value", "lo", "hi", "count", "of", "note"]

#: Per-episode totals every deploy metric is a ratio of.
FIELDS = ("succ", "succ_stopped", "fail", "fail_stopped", "fail_calls", "fail_calls_saved", "fail_tokens",
          "fail_tokens_saved", "loops", "loops_caught", "runaway", "runaway_caught", "blip", "blip_caught",
          "clean_calls", "clean_alarms")
_F = {f: i for i, f in enumerate(FIELDS)}

#: (action, metric, numerator, denominator, scale); the metric is numerator / denominator × scale.
METRICS = (
    ("halt", "successes_stopped", "succ_stopped", "succ", 1.0),
    ("halt", "failures_stopped", "fail_stopped", "fail", 1.0),
    ("halt", "failed_calls_saved", "fail_calls_saved", "fail_calls", 1.0),
    ("halt", "failed_tokens_saved", "fail_tokens_saved", "fail_tokens", 1.0),
    ("halt", "loops_caught", "loops_caught", "loops", 1.0),
    ("halt", "runaway_caught", "runaway_caught", "runaway", 1.0),
    ("nudge", "blips_nudged", "blip_caught", "blip", 1.0),
    ("nudge", "runaway_nudged", "runaway_caught", "runaway", 1.0),
    ("nudge", "nudges_per_100_clean", "clean_alarms", "clean_calls", 100.0),
)

#: The reference row of ``deploy.csv`` and ``deploy_curves.csv``: halts where the labels say a loop is.
LABEL_ORACLE = "label_oracle"
#: The metrics the halting actions (``halt``, ``configured``, the oracle) report.
HALT_METRICS = tuple(m for a, m, *_ in METRICS if a == "halt")


@dataclass(frozen=True)
class Outcomes:
    """Each episode's run outcome and where it was read from (``episodes.csv``, ``closed.csv`` or none)."""

    by_episode: dict[str, str]
    source: str

    @property
    def known(self) -> bool:
        return any(v in (SUCCESS, FAILURE) for v in self.by_episode.values())


def run_outcomes(episodes: pd.DataFrame, closed: pd.DataFrame | None = None) -> Outcomes:
    """Run outcome per episode: from ``episodes.csv`` where recorded, else from an uninterrupted
    closed-loop play in ``closed.csv``, else ``unknown``."""
    ids = list(dict.fromkeys(episodes["episode"].astype(str))) if len(episodes) else []
    out = {e: UNKNOWN for e in ids}
    col = "run_outcome" if "run_outcome" in episodes else None
    if col is None and "outcome" in episodes and set(episodes["outcome"].dropna().astype(str)) <= set(OUTCOMES):
        col = "outcome"
    source = "none"
    if col is not None:
        for e, v in zip(episodes["episode"].astype(str), episodes[col].astype(str)):
            if v in (SUCCESS, FAILURE) and out.get(e) == UNKNOWN:
                out[e] = v
                source = "episodes.csv"
    if source == "none" and closed is not None and len(closed):
        quiet = closed[(closed[["nudge", "prune", "escalate", "stop"]].fillna(0).sum(axis=1) == 0)]
        for e, s in zip(quiet["episode"].astype(str), quiet["success"]):
            if e in out and out[e] == UNKNOWN:
                out[e] = SUCCESS if as_bool(s) else FAILURE
                source = "closed.csv (uninterrupted closed-loop play)"
    return Outcomes(out, source)


def severities(units: pd.DataFrame, calls: pd.DataFrame) -> list[str]:
    """Per ``episodes.csv`` unit: ``runaway``, ``blip`` or ``unknown`` (clean units: ``unknown``).

    Read from the ``severity`` column where recorded. Where it is not, it follows from the
    ``calls.csv`` labels of a single-path episode (every call at its own path position):
    persistence = loop-labelled calls in a row from the onset; runaway when it is at least
    :data:`scenarios.severity.RUNAWAY_PERSISTENCE` or lasts to the episode's last call. Branching episodes stay unknown.
    """
    if "severity" in units:
        # (An all-empty column reads as floats: NaN is neither runaway nor blip.)
        return [s if s in (RUNAWAY, BLIP) else UNKNOWN for s in units["severity"].tolist()]
    runs: dict[str, list] = {}
    if len(calls) and "label_loop" in calls:
        for e, g in calls.groupby(calls["episode"].astype(str), sort=False):
            depth = pd.to_numeric(g["depth"]).to_numpy()
            if len(set(depth.tolist())) == len(depth):  # one call per path position: a single path
                order = np.argsort(depth, kind="stable")
                runs[e] = [(int(depth[i]), as_bool(g["label_loop"].iloc[i])) for i in order]
    out = []
    onsets = pd.to_numeric(units["onset"], errors="coerce").to_numpy() if "onset" in units else [np.nan] * len(units)
    for e, o in zip(units["episode"].astype(str), onsets):
        seq = runs.get(e)
        if seq is None or np.isnan(o):
            out.append(UNKNOWN)
            continue
        after = [lab for d, lab in seq if d >= o]
        persistence = next((i for i, lab in enumerate(after) if lab is not True), len(after))
        out.append(Severity(persistence, persistence == len(after)).severity)
    return out


class DeployRows:
    """One detector's ``episodes.csv`` / ``calls.csv`` rows, read once for the deploy totals of
    any number of alarm settings (a sweep, a tuning search): what does not depend on the
    alarms — labels, outcomes, severities, tokens — is parsed here, not per setting.

    ``keys`` orders the totals' rows (episode -> row); ``outcomes`` is each episode's run outcome.
    """

    def __init__(self, units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], keys: Mapping[str, int]):
        n = len(keys)
        self.n = n
        codes, names = pd.factorize(calls["episode"].astype(str), sort=False)
        self._codes, self._n_eps = codes, len(names)
        self.row = np.array([keys.get(e, -1) for e in names], dtype=int)[codes] if len(calls) else np.zeros(0, int)
        self.idx = pd.to_numeric(calls["call_index"]).to_numpy(dtype=float)
        self.depth = pd.to_numeric(calls["depth"]).to_numpy(dtype=float)
        self.stored = (calls["verdict"].astype(str) != "allow").to_numpy()
        self.tokens = pd.to_numeric(calls["tokens"], errors="coerce").fillna(0).to_numpy() if "tokens" in calls else None
        lab = [as_bool(v) for v in calls["label_loop"]] if "label_loop" in calls else [None] * len(calls)
        valid = self.row >= 0
        self.clean = valid & np.array([lb is False for lb in lab], dtype=bool)
        outcome_of_row = [None] * n
        for e, r in keys.items():
            outcome_of_row[r] = outcomes.get(e)
        self.succ = np.array([o == SUCCESS for o in outcome_of_row], dtype=bool)
        self.fail = np.array([o == FAILURE for o in outcome_of_row], dtype=bool)
        self.fail_call = valid & self.fail[np.where(valid, self.row, 0)] if n and len(calls) else np.zeros(len(calls), bool)
        # per unit: its row, its episode's code among the calls', whether it loops, its severity
        unit_eps = units["episode"].astype(str)
        self.unit_row = np.array([keys.get(e, -1) for e in unit_eps], dtype=int)
        code_of = {e: i for i, e in enumerate(names)}
        self._code_row = np.full(len(names), -1)  # episode code -> totals row (-1: not in keys)
        self._code_row[codes] = self.row
        self.unit_code = np.array([code_of.get(e, -1) for e in unit_eps], dtype=int)
        outcome = units["outcome"].astype(str)
        self.looping = (outcome.isin(["tp", "miss", "early"]).to_numpy()) & (self.unit_row >= 0)
        self.tp = (outcome == "tp").to_numpy()
        self.onset = (pd.to_numeric(units["onset"], errors="coerce").to_numpy(dtype=float) if "onset" in units
                      else np.full(len(units), np.nan))
        self.severity = np.array(severities(units, calls), dtype=object)

    def _first(self, values: np.ndarray, alarm: np.ndarray) -> np.ndarray:
        """Per episode code: the smallest of ``values`` over its alarmed calls (inf: none)."""
        first = np.full(self._n_eps, np.inf)
        np.minimum.at(first, self._codes[alarm], values[alarm])
        return first

    def caught(self, alarm: np.ndarray, delta: int) -> np.ndarray:
        """Per unit, whether ``alarm`` catches its loop (:func:`caught_from_calls`)."""
        first = self._first(self.depth, alarm)
        at = np.append(first, np.inf)[self.unit_code]  # code -1 (no call of the unit's episode): inf
        return ~np.isnan(self.onset) & (self.onset <= at) & (at <= self.onset + delta)

    def totals(self, alarm: np.ndarray | None = None, caught: Sequence[bool] | None = None) -> np.ndarray:
        """The ``(episodes × FIELDS)`` totals (:func:`episode_totals`)."""
        alarm = self.stored if alarm is None else np.asarray(alarm, dtype=bool)
        x = np.zeros((self.n, len(FIELDS)))
        n = self.n

        def count(mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
            return np.bincount(self.row[mask], weights=None if weights is None else weights[mask], minlength=n)

        x[:, _F["clean_calls"]] = count(self.clean)
        x[:, _F["clean_alarms"]] = count(self.clean & alarm)
        first = self._first(self.idx, alarm)
        saved = self.idx >= first[self._codes] if len(self.idx) else np.zeros(0, bool)
        x[:, _F["fail_calls"]] = count(self.fail_call)
        x[:, _F["fail_calls_saved"]] = count(self.fail_call & saved)
        if self.tokens is not None:
            x[:, _F["fail_tokens"]] = count(self.fail_call, self.tokens)
            x[:, _F["fail_tokens_saved"]] = count(self.fail_call & saved, self.tokens)
        stopped = np.zeros(n, dtype=bool)
        stopped[self._code_row[np.isfinite(first) & (self._code_row >= 0)]] = True
        for pre, mask in (("succ", self.succ), ("fail", self.fail)):
            x[:, _F[pre]] = mask
            x[:, _F[pre + "_stopped"]] = mask & stopped
        c = self.tp if caught is None else np.asarray(caught, dtype=bool)
        loop = self.looping
        np.add.at(x[:, _F["loops"]], self.unit_row[loop], 1)
        np.add.at(x[:, _F["loops_caught"]], self.unit_row[loop & c], 1)
        for sev in (RUNAWAY, BLIP):
            m = loop & (self.severity == sev)
            np.add.at(x[:, _F[sev]], self.unit_row[m], 1)
            np.add.at(x[:, _F[sev + "_caught"]], self.unit_row[m & c], 1)
        return x

    def alarm_totals(self, alarm: np.ndarray, delta: int) -> np.ndarray:
        """The totals when ``alarm`` halts, each loop caught by it within ``delta`` of its onset."""
        return self.totals(alarm, self.caught(alarm, delta))


def episode_totals(units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], keys: Mapping[str, int],
                   alarm: np.ndarray | None = None, caught: Sequence[bool] | None = None) -> np.ndarray:
    """An ``(episodes × FIELDS)`` array of one detector's deploy totals, rows in ``keys`` order.

    ``units``: the detector's ``episodes.csv`` rows; ``calls``: its ``calls.csv`` rows.
    ``alarm`` overrides the stored verdicts per call (a threshold sweep), and ``caught`` the
    per-unit catches (the scorer's TP) that go with it. For many settings of one detector,
    read the rows once with :class:`DeployRows`.
    """
    return DeployRows(units, calls, outcomes, keys).totals(alarm, caught)


def metrics_from_totals(t: np.ndarray) -> dict[str, np.ndarray]:
    """Every deploy metric from totals ``t[..., FIELDS]`` (any leading axes); NaN when undefined."""
    out = {}
    for _, name, num, den, scale in METRICS:
        n, d = t[..., _F[num]], t[..., _F[den]]
        out[name] = scale * np.divide(n, d, out=np.full(np.broadcast(n, d).shape, np.nan), where=d > 0)
    return out


def recorded(episodes: pd.DataFrame, calls: pd.DataFrame) -> tuple[bool, bool]:
    """Whether a run's files record loop severities, and tokens per call (what :func:`metric_note` asks)."""
    has_sev = bool(len(episodes)) and any(v != UNKNOWN for v in severities(
        episodes.drop_duplicates(["episode", "unit"]), calls.drop_duplicates(["episode", "node"])))
    has_tok = "tokens" in calls and bool(pd.to_numeric(calls["tokens"], errors="coerce").fillna(0).gt(0).any())
    return has_sev, has_tok


def metric_note(metric: str, outcomes: Outcomes, has_severity: bool, has_tokens: bool, den: float) -> str:
    """Why ``metric`` is not measured (empty: it is): no run outcome, no tokens, no severity, no episode."""
    if metric in ("successes_stopped", "failures_stopped", "failed_calls_saved", "failed_tokens_saved"):
        if not outcomes.known:
            return "run outcome unknown for every episode"
        if metric == "failed_tokens_saved" and not has_tokens:
            return "tokens not recorded in calls.csv"
    if metric in ("runaway_caught", "blips_nudged", "runaway_nudged") and not has_severity:
        return "severity unknown (not in episodes.csv, no single-path labels)"
    if not den:
        return "no episode to measure on"
    return ""


def deploy_rows(episodes: pd.DataFrame, calls: pd.DataFrame, closed: pd.DataFrame | None = None, *,
                rounds: int = ROUNDS, seed: int = SEED, level: float = LEVEL,
                outcomes: Outcomes | None = None, delta: int = DELTA) -> list[dict]:
    """``deploy.csv`` rows (:data:`DEPLOY_COLUMNS`) for every detector of a run's files, then the
    label oracle's (``outcomes``: :func:`run_outcomes` of the same files, when the caller has it;
    ``delta``: the run's detection window Δ)."""
    if not len(episodes) or not len(calls):
        return []
    outcomes = outcomes or run_outcomes(episodes, closed)
    ep_fam = dict(zip(episodes["episode"].astype(str), episodes["family"].astype(str)))
    keys = {e: i for i, e in enumerate(ep_fam)}
    boot = Bootstrap(list(keys), [ep_fam[e] for e in keys], rounds=rounds, seed=seed, level=level)
    has_sev, has_tok = recorded(episodes, calls)
    rows: list[dict] = []

    def add(det: str, action: str, x: np.ndarray, metrics: Sequence[tuple]) -> None:
        point, per_round = boot.totals(x)
        pm, rm = metrics_from_totals(point), metrics_from_totals(per_round)
        for name, num, den in metrics:
            note = metric_note(name, outcomes, has_sev, has_tok, point[_F[den]])
            measured = note == ""
            lo, hi = percentile_interval(rm[name], level) if measured else (np.nan, np.nan)
            rows.append({"detector": det, "action": action, "metric": name,
                         "value": as_float(pm[name]) if measured else None, "lo": as_float(lo) if measured else None,
                         "hi": as_float(hi) if measured else None, "count": int(point[_F[num]]) if measured else None,
                         "of": int(point[_F[den]]) if measured else None, "note": note})

    by_calls = dict(tuple(calls.groupby("detector", sort=False)))
    halt = [(m, num, den) for a, m, num, den, _ in METRICS if a == "halt"]
    nudge = [(m, num, den) for a, m, num, den, _ in METRICS if a == "nudge"]
    det_rows = {}
    for det, units in episodes.groupby("detector", sort=False):
        dc = by_calls.get(det, calls.iloc[:0])
        det_rows[det] = r = DeployRows(units, dc, outcomes.by_episode, keys)
        first = r.totals()  # every alarm: halts at the first, nudges at all
        add(det, "halt", first, halt)
        add(det, "nudge", first, nudge)
        add(det, "configured", r.alarm_totals(dc["verdict"].astype(str).isin(HALTING_VERDICTS).to_numpy(), delta), halt)
    det0 = str(episodes["detector"].iloc[0])  # the labels are the same in every detector's rows
    dc = by_calls.get(det0, calls.iloc[:0])
    if "label_loop" in dc:
        add(LABEL_ORACLE, "halt", det_rows[det0].alarm_totals(labelled_rank(dc) == 1, delta), halt)
    return rows


def labelled_rank(calls: pd.DataFrame) -> np.ndarray:
    """Per ``calls.csv`` row: 1, 2, … for each episode's calls labelled a loop, in call order; 0
    for the others. Halting at rank k is the label oracle's k-th point."""
    lab = np.array([as_bool(v) is True for v in calls["label_loop"]], dtype=bool)
    idx = pd.to_numeric(calls["call_index"]).to_numpy()
    eps = calls["episode"].astype(str).to_numpy()
    out = np.zeros(len(calls), dtype=int)
    seen: dict[str, int] = {}
    for j in np.lexsort((idx, eps)):
        if lab[j]:
            out[j] = seen[eps[j]] = seen.get(eps[j], 0) + 1
    return out


def caught_from_calls(units: pd.DataFrame, calls: pd.DataFrame, alarm: np.ndarray, delta: int) -> list[bool]:
    """Per ``episodes.csv`` unit, whether ``alarm`` (per ``calls.csv`` row) catches its loop: the
    episode's first alarmed path position (``depth``) falls within ``[onset, onset + delta]``.
    Exact for single-path episodes (every real trace); on a branching episode it takes the
    first alarm anywhere in the episode, as ``calls.csv`` does not say which path a call is on."""
    return DeployRows(units, calls, {}, {}).caught(np.asarray(alarm, dtype=bool), delta).tolist()


#: The figures of one operating-curve point (``deploy_curves.csv``).
CURVE_METRICS = ("successes_stopped", "failures_stopped", "failed_calls_saved", "loops_caught", "runaway_caught",
                 "nudges_per_100_clean")


def _curve_point(rows: DeployRows, alarm: np.ndarray, delta: int) -> dict:
    m = metrics_from_totals(rows.alarm_totals(alarm, delta).sum(axis=0))
    return {k: as_float(m[k]) for k in CURVE_METRICS}


def _unit_keys(units: pd.DataFrame) -> dict[str, int]:
    return {e: i for i, e in enumerate(dict.fromkeys(units["episode"].astype(str)))}


def operating_curve(units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], values: Sequence[float],
                    threshold_for: Callable[[str, float], float], delta: int) -> list[dict]:
    """Successes stopped and failed-run calls saved (halting) at every swept threshold value.

    ``threshold_for(tool, value)``: the detector's threshold; a call alarms iff its stored score
    reaches it (the sweep contract of :mod:`sim.scoring.thresholds`).
    """
    rows = DeployRows(units, calls, outcomes, _unit_keys(units))
    scores = pd.to_numeric(calls["score"], errors="coerce").fillna(-np.inf).to_numpy()
    tools = calls["tool"].astype(str).tolist()
    out = []
    for v in values:
        cache: dict[str, float] = {}
        th = np.fromiter((cache[t] if t in cache else cache.setdefault(t, float(threshold_for(t, v))) for t in tools),
                         dtype=float, count=len(tools))
        out.append({"value": v, **_curve_point(rows, scores >= th, delta)})
    return out


#: The oracle's halt points: at the 1st … 8th call the labels mark redundant.
ORACLE_KS = tuple(range(1, 9))


def oracle_curve(units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], delta: int,
                 ks: Sequence[int] = ORACLE_KS) -> list[dict]:
    """The label oracle's operating curve: one point per k, halting at each episode's k-th
    labelled redundant call (``units``/``calls``: one detector's rows; only their labels are read)."""
    rows, rank = DeployRows(units, calls, outcomes, _unit_keys(units)), labelled_rank(calls)
    return [{"value": k, **_curve_point(rows, rank == k, delta)} for k in ks]


#: The latest halt level tried for a guard that nudges first: later halts are never worth a run's budget.
MAX_HALT = 8


def halt_levels(calls: pd.DataFrame, found: np.ndarray | None = None) -> list[int]:
    """Halt (or nudge) levels worth trying for a guard that nudges first (``halt_param``, e.g.
    ``stop_after``): 0 (at the first finding) up to the first level that reaches none of the stored
    findings (their scores are 1 + the strikes before them), or :data:`MAX_HALT`, whichever comes
    first. ``found``: which calls are findings (default: the alarmed ones; a guard that keeps its
    first findings silent stores them as ALLOWs with their score)."""
    if found is None:
        found = (calls["verdict"].astype(str) != "allow").to_numpy()
    scores = pd.to_numeric(calls.loc[found, "score"], errors="coerce").dropna()
    top = float(scores.max()) if len(scores) else 1.0
    return list(range(0, int(min(MAX_HALT, max(1, math.ceil(top)))) + 1))


def write_deploy(run_dir: Path, out: Path | None = None, *, rounds: int = ROUNDS, seed: int = SEED,
                 delta: int = DELTA) -> list[dict]:
    """Compute the deployment view of ``run_dir`` from its files and write ``deploy.csv`` into ``out``
    (default: the run folder); returns the rows."""
    run_dir = Path(run_dir)
    rows = deploy_rows(read_table(run_dir / "episodes.csv"), read_table(run_dir / "calls.csv"),
                       read_table(run_dir / "closed.csv"), rounds=rounds, seed=seed, delta=delta)
    write_csv(Path(out or run_dir) / "deploy.csv", rows, DEPLOY_COLUMNS)
    return rows
