"""``loopbench tune --objective deploy``: when a guard that nudges first should halt (SPEC §11).

A detector with a graduated response names its halt parameter (``halt_param``, a hook of
:class:`detectors.protocol.Detector`; ``progress_guard``: ``stop_after``): an alarmed call
halts the run iff its stored score reaches ``halt_threshold(tool, value)``, and every other
alarm nudges. So every halt setting — one global value and per-tool overrides — is evaluated
from one open-loop run's ``episodes.csv`` / ``calls.csv`` rows, with the deployment view's own
totals (:func:`sim.scoring.deploy.episode_totals`): no re-run per candidate.

The pick: among the settings whose halts stop at most ``max_stopped`` of the successful runs,
the one that saves the most calls of failed runs, then catches the most runaway loops, then
the most loops; ties go to the later halt (more nudges first). When no setting meets the cap,
the one that stops the fewest successful runs, flagged as not met. Per-tool overrides come
from a coordinate search from the global pick, as the false-alarm objective does (:mod:`sim.tuning.tune`).

The nudge side is what the detector's alarms are below the halt: its figures (blips and runaway
loops nudged, nudges per 100 clean calls) are reported for the configuration, and there is no
further threshold in the stored scores to move (a detector with a ``threshold_param`` has none
of its own halt, see docs/scoring.md).

With episodes from two or more corpora (families of a real suite), :func:`loco` repeats the pick
leaving each corpus out and scores it on the held-out one.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from detectors.protocol import Detector
from sim.scoring.deploy import FIELDS, caught_from_calls, episode_totals, halt_levels, metrics_from_totals
from sim.numbers import as_float
from sim.tuning.params import Overrides, TuningError

_F = {f: i for i, f in enumerate(FIELDS)}
#: The figures the pick reports, halting (first three: the ones SPEC §11 sets targets for) and nudging.
HALT_FIGURES = ("successes_stopped", "failed_calls_saved", "runaway_caught", "failures_stopped", "loops_caught")
NUDGE_FIGURES = ("blips_nudged", "runaway_nudged", "nudges_per_100_clean")


def check_detector(det: Detector) -> str:
    """The detector's halt parameter; :class:`TuningError` when it has no graduated response."""
    param = getattr(det, "halt_param", None)
    if not param:
        raise TuningError(f"{type(det).__name__} has no graduated response (no halt_param): --objective deploy picks "
                          "when a guard that nudges first halts, e.g. progress_guard's stop_after")
    return param


def frames(calls_text: str, outcome_rows: Sequence[Mapping[str, Any]], call_columns: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(episodes.csv rows, calls.csv rows)`` as the run folder would hold them."""
    calls = pd.read_csv(io.StringIO(",".join(call_columns) + "\n" + calls_text), keep_default_na=False,
                        na_values=[""], low_memory=False)
    return pd.DataFrame(list(outcome_rows)), calls


@dataclass
class Setting:
    """One halt setting (global value, per-tool values) and what it does to the runs."""

    value: int
    tools: dict[str, int]
    totals: np.ndarray
    nudge: np.ndarray

    @property
    def figures(self) -> dict[str, float | None]:
        m = metrics_from_totals(self.totals)
        n = metrics_from_totals(self.nudge)
        out = {k: as_float(m[k]) for k in HALT_FIGURES}
        out.update({k: as_float(n[k]) for k in NUDGE_FIGURES})
        return out

    def counts(self, num: str, den: str) -> tuple[int, int]:
        return int(self.totals[_F[num]]), int(self.totals[_F[den]])

    def key(self, cap: float) -> tuple:
        t = self.totals
        excess = max(0.0, t[_F["succ_stopped"]] - cap * t[_F["succ"]])
        figs = metrics_from_totals(t)
        late = self.value + sum(self.tools.values()) / 1000.0
        return (round(excess, 9), -(as_float(figs["failed_calls_saved"]) or 0.0), -(as_float(figs["runaway_caught"]) or 0.0),
                -(as_float(figs["loops_caught"]) or 0.0), -late)

    def met(self, cap: float) -> bool:
        return self.totals[_F["succ_stopped"]] <= cap * self.totals[_F["succ"]] + 1e-9




class HaltEvaluator:
    """Totals of halt settings on one detector's rows, from the stored scores and verdicts."""

    def __init__(self, det: Detector, units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], delta: int):
        self.det, self.units, self.calls, self.outcomes, self.delta = det, units, calls, outcomes, delta
        self.param = check_detector(det)
        self.keys = {e: i for i, e in enumerate(dict.fromkeys(units["episode"].astype(str)))}
        self.alarmed = (calls["verdict"].astype(str) != "allow").to_numpy()
        self.scores = pd.to_numeric(calls["score"], errors="coerce").fillna(-np.inf).to_numpy()
        self.tool = calls["tool"].astype(str).to_numpy()
        self.tools = sorted(set(self.tool[self.alarmed].tolist()))
        self.candidates = halt_levels(calls)
        self.nudge = self._totals(self.alarmed)

    def _totals(self, alarm: np.ndarray) -> np.ndarray:
        return episode_totals(self.units, self.calls, self.outcomes, self.keys, alarm=alarm,
                              caught=caught_from_calls(self.units, self.calls, alarm, self.delta)).sum(axis=0)

    def detector(self, value: int, tools: Mapping[str, int]) -> Detector:
        base: Overrides = {t: dict(e) for t, e in (getattr(self.det, "tool_overrides", None) or {}).items()}
        for t, v in tools.items():
            base.setdefault(t, {})[self.param] = v
        return self.det.clone(**{self.param: value, "tool_overrides": base or None})

    def evaluate(self, value: int, tools: Mapping[str, int]) -> Setting:
        det = self.detector(value, tools)
        thr = {t: float(det.halt_threshold(t, value)) for t in set(self.tool.tolist())}
        halt = self.alarmed & (self.scores >= np.array([thr[t] for t in self.tool], dtype=float))
        return Setting(value, dict(tools), self._totals(halt), self.nudge)


@dataclass
class DeployPick:
    """The halt setting picked under the cap, the configured one, and the search's log."""

    param: str
    cap: float
    picked: Setting
    configured: Setting
    candidates: list[int]
    log: list[str] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return self.picked.met(self.cap)

    def overrides(self, base: Overrides | None) -> Overrides:
        out: Overrides = {t: dict(e) for t, e in (base or {}).items()}
        for t, v in self.picked.tools.items():
            out.setdefault(t, {})[self.param] = v
        return out


def pick(det: Detector, units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], cap: float, *,
         delta: int, per_tool: bool = True, max_passes: int = 4) -> DeployPick:
    """The halt setting of ``det`` (global value, then per-tool overrides) under ``cap`` (module docstring)."""
    if not 0 <= cap <= 1:
        raise TuningError(f"--max-stopped {cap!r}: must be a share between 0 and 1, e.g. 0.01")
    ev = HaltEvaluator(det, units, calls, outcomes, delta)
    if not any(outcomes.get(e) == "success" for e in ev.keys):
        raise TuningError("no episode with a successful run outcome: --objective deploy needs recorded outcomes "
                          "(e.g. --suite real-dev)")
    configured = int(getattr(det, ev.param))
    log: list[str] = []
    globals_ = [ev.evaluate(v, {}) for v in ev.candidates]
    best = min(globals_, key=lambda s: s.key(cap))
    log.append(f"{ev.param} = {best.value} of {ev.candidates}")
    if per_tool:
        for p in range(1, max_passes + 1):
            changed = False
            for tool in ev.tools:
                trials = [ev.evaluate(best.value, {k: v for k, v in best.tools.items() if k != tool})]
                trials += [ev.evaluate(best.value, {**best.tools, tool: v}) for v in ev.candidates if v != best.value]
                cand = min(trials, key=lambda s: s.key(cap))
                if cand.key(cap)[:-1] < best.key(cap)[:-1]:  # a per-tool value must change what the halts do
                    best, changed = cand, True
                    log.append(f"pass {p}: {tool} -> {ev.param} = {cand.tools.get(tool, cand.value)}")
            if not changed:
                break
    return DeployPick(ev.param, cap, best, ev.evaluate(configured, {}), ev.candidates, log)


def loco(det: Detector, units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], cap: float, *,
         delta: int, per_tool: bool = True) -> list[dict[str, Any]]:
    """Leave one corpus (family) out: the pick made on the other corpora, scored on the held-out
    one; a last row ``pooled`` sums the held-out totals of every fold. ``overrides_applied``: how
    many of the fold's per-tool overrides name a tool the held-out corpus calls (an override of a
    tool it never calls cannot help or hurt it)."""
    corpora = sorted(set(units["family"].astype(str)))
    if len(corpora) < 2:
        raise TuningError(f"leave-one-corpus-out needs at least 2 corpora (families); the episodes have {len(corpora)}")
    rows, pooled = [], None
    for c in corpora:
        tu, tc = units[units["family"] != c], calls[calls["family"] != c]
        hu, hc = units[units["family"] == c], calls[calls["family"] == c]
        try:
            p = pick(det, tu, tc, outcomes, cap, delta=delta, per_tool=per_tool)
        except TuningError as exc:
            rows.append({"corpus": c, "setting": "", "note": str(exc)})
            continue
        held = HaltEvaluator(det, hu, hc, outcomes, delta).evaluate(p.picked.value, p.picked.tools)
        pooled = held.totals if pooled is None else pooled + held.totals
        held_tools = set(hc["tool"].astype(str))
        rows.append({"corpus": c, "setting": setting_text(p.param, p.picked), "met_on_others": p.met,
                     "overrides_applied": f"{sum(t in held_tools for t in p.picked.tools)}/{len(p.picked.tools)}",
                     **_row(held), "note": ""})
    if pooled is not None:
        pooled_nudge = HaltEvaluator(det, units, calls, outcomes, delta).nudge
        rows.append({"corpus": "pooled", "setting": "per fold", "met_on_others": None, "overrides_applied": "",
                     **_row(Setting(0, {}, pooled, pooled_nudge)), "note": ""})
    return rows


def _row(s: Setting) -> dict[str, Any]:
    f = s.figures
    out = {k: f[k] for k in HALT_FIGURES}
    out["successes"] = "{}/{}".format(*s.counts("succ_stopped", "succ"))
    out["runaway"] = "{}/{}".format(*s.counts("runaway_caught", "runaway"))
    out["failed_calls"] = "{}/{}".format(*s.counts("fail_calls_saved", "fail_calls"))
    return out


def setting_text(param: str, s: Setting) -> str:
    return f"{param} = {s.value}" + "".join(f"; {t}: {v}" for t, v in sorted(s.tools.items()))
