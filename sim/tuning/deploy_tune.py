"""``loopbench tune --objective deploy``: when a guard that nudges first should speak up, and when
it should halt (SPEC §11).

A detector with a graduated response names its halt parameter (``halt_param``, a hook of
:class:`detectors.protocol.Detector`; ``progress_guard``: ``stop_after``): a finding halts the run
iff its stored score reaches ``halt_threshold(tool, value)``. One that may also keep its first
findings to itself names a nudge parameter (``nudge_param``; ``progress_guard``: ``nudge_after``):
a finding is voiced iff its score reaches ``nudge_threshold(tool, value)``. So every setting —
the two global values and per-tool overrides of each — is evaluated from one open-loop run's
``episodes.csv`` / ``calls.csv`` rows, with the deployment view's own totals
(:class:`sim.scoring.deploy.DeployRows`): no re-run per candidate. (Open loop, a finding's
strikes do not depend on whether it was voiced: the trace goes on as recorded.)

The halt pick: among the settings whose halts stop at most ``max_stopped`` of the successful
runs, the one that saves the most calls of failed runs, then catches the most runaway loops,
then the most loops; ties go to the later halt (more nudges first). When no setting meets the
cap, the one that stops the fewest successful runs, flagged as not met.

The nudge pick: a nudge costs the agent a sentence, not the run, so without a budget every
finding is voiced (``nudge_after = 0``). With ``max_nudges`` (nudges per 100 calls not labelled
as loops) it is the earliest setting within that budget that nudges the most loops within Δ.
Per-tool overrides of either come from a coordinate search from the global pick, as the
false-alarm objective does (:mod:`sim.tuning.tune`).

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
from sim.scoring.deploy import FIELDS, DeployRows, halt_levels, metrics_from_totals
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
    """One setting (halt: global value and per-tool values; nudge likewise) and what it does."""

    value: int
    tools: dict[str, int]
    totals: np.ndarray
    nudge: np.ndarray
    nudge_value: int = 0
    nudge_tools: dict[str, int] = field(default_factory=dict)

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

    def nudge_key(self, budget: float) -> tuple:
        """Within ``budget`` nudges per 100 clean calls, the most loops nudged, then the earliest."""
        t = self.nudge
        excess = max(0.0, t[_F["clean_alarms"]] - budget / 100.0 * t[_F["clean_calls"]])
        late = self.nudge_value + sum(self.nudge_tools.values()) / 1000.0
        return (round(excess, 9), -(t[_F["blip_caught"]] + t[_F["runaway_caught"]]), -t[_F["loops_caught"]], late)

    def met(self, cap: float) -> bool:
        return self.totals[_F["succ_stopped"]] <= cap * self.totals[_F["succ"]] + 1e-9


class HaltEvaluator:
    """Totals of (nudge, halt) settings on one detector's rows, from the stored scores and verdicts."""

    def __init__(self, det: Detector, units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], delta: int):
        self.det, self.delta = det, delta
        self.param = check_detector(det)
        self.nudge_param: str | None = getattr(det, "nudge_param", None)
        self.keys = {e: i for i, e in enumerate(dict.fromkeys(units["episode"].astype(str)))}
        self.rows = DeployRows(units, calls, outcomes, self.keys)  # read once for every setting
        self.scores = pd.to_numeric(calls["score"], errors="coerce").fillna(-np.inf).to_numpy()
        self.tool = calls["tool"].astype(str).to_numpy()
        found = (calls["verdict"].astype(str) != "allow").to_numpy()
        if self.nudge_param:  # silent findings are stored as ALLOWs scored as findings
            found = found | (self.scores >= self._thresholds(det.nudge_threshold, 0))
        self.found = found
        self.tools = sorted(set(self.tool[found].tolist()))
        self.candidates = halt_levels(calls, found)

    def _thresholds(self, threshold, value) -> np.ndarray:
        per = {t: float(threshold(t, value)) for t in set(self.tool.tolist())}
        return np.array([per[t] for t in self.tool], dtype=float)

    def _totals(self, alarm: np.ndarray) -> np.ndarray:
        return self.rows.alarm_totals(alarm, self.delta).sum(axis=0)

    def detector(self, value: int, tools: Mapping[str, int], nudge_value: int = 0,
                 nudge_tools: Mapping[str, int] | None = None) -> Detector:
        base: Overrides = {t: dict(e) for t, e in (getattr(self.det, "tool_overrides", None) or {}).items()}
        for t, v in tools.items():
            base.setdefault(t, {})[self.param] = v
        params: dict[str, Any] = {self.param: value}
        if self.nudge_param:
            for t, v in (nudge_tools or {}).items():
                base.setdefault(t, {})[self.nudge_param] = v
            params[self.nudge_param] = nudge_value
        return self.det.clone(**params, tool_overrides=base or None)

    def evaluate(self, value: int, tools: Mapping[str, int], nudge_value: int = 0,
                 nudge_tools: Mapping[str, int] | None = None) -> Setting:
        nudge_tools = dict(nudge_tools or {})
        det = self.detector(value, tools, nudge_value, nudge_tools)
        halt = self.found & (self.scores >= self._thresholds(det.halt_threshold, value))
        voiced = halt | (self.found & (self.scores >= self._thresholds(det.nudge_threshold, nudge_value))
                         if self.nudge_param else self.found)
        return Setting(value, dict(tools), self._totals(halt), self._totals(voiced), nudge_value, nudge_tools)


def _with_tool(ev: HaltEvaluator, s: Setting, which: str, tool: str, v: int | None) -> Setting:
    """``s`` with ``tool``'s ``which`` value ("halt" or "nudge") set to ``v`` (``None``: the global one)."""
    tools = dict(s.tools if which == "halt" else s.nudge_tools)
    tools.pop(tool, None)
    if v is not None:
        tools[tool] = v
    if which == "halt":
        return ev.evaluate(s.value, tools, s.nudge_value, s.nudge_tools)
    return ev.evaluate(s.value, s.tools, s.nudge_value, tools)


def _per_tool(ev: HaltEvaluator, best: Setting, which: str, key, log: list[str], max_passes: int) -> Setting:
    """Per-tool ``which`` values ("halt" or "nudge") by coordinate search from ``best``: a tool keeps
    a value only when it changes the figures ``key`` ranks (its last element, lateness, only
    breaks ties)."""
    name = ev.param if which == "halt" else ev.nudge_param
    for p in range(1, max_passes + 1):
        changed = False
        for tool in ev.tools:
            current = best.value if which == "halt" else best.nudge_value
            trials = [_with_tool(ev, best, which, tool, None)]
            trials += [_with_tool(ev, best, which, tool, v) for v in ev.candidates if v != current]
            cand = min(trials, key=key)
            if key(cand)[:-1] < key(best)[:-1]:
                best, changed = cand, True
                value = cand.tools.get(tool, cand.value) if which == "halt" else cand.nudge_tools.get(tool, cand.nudge_value)
                log.append(f"pass {p}: {tool} -> {name} = {value}")
        if not changed:
            break
    return best


@dataclass
class DeployPick:
    """The setting picked under the cap (and nudge budget), the configured one, and the search's log."""

    param: str
    cap: float
    picked: Setting
    configured: Setting
    candidates: list[int]
    log: list[str] = field(default_factory=list)
    nudge_param: str | None = None
    max_nudges: float | None = None

    @property
    def met(self) -> bool:
        return self.picked.met(self.cap)

    @property
    def nudges_met(self) -> bool:
        return self.max_nudges is None or self.picked.nudge_key(self.max_nudges)[0] == 0

    def overrides(self, base: Overrides | None) -> Overrides:
        out: Overrides = {t: dict(e) for t, e in (base or {}).items()}
        for t, v in self.picked.tools.items():
            out.setdefault(t, {})[self.param] = v
        if self.nudge_param:
            for t, v in self.picked.nudge_tools.items():
                out.setdefault(t, {})[self.nudge_param] = v
        return out


def pick(det: Detector, units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], cap: float, *,
         delta: int, per_tool: bool = True, max_passes: int = 4, max_nudges: float | None = None) -> DeployPick:
    """The halt setting of ``det`` (global value, then per-tool overrides) under ``cap``, then its
    nudge setting within ``max_nudges`` nudges per 100 clean calls (module docstring)."""
    if not 0 <= cap <= 1:
        raise TuningError(f"--max-stopped {cap!r}: must be a share between 0 and 1, e.g. 0.01")
    if max_nudges is not None and max_nudges < 0:
        raise TuningError(f"--max-nudges {max_nudges!r}: must be a rate of nudges per 100 clean calls, >= 0")
    ev = HaltEvaluator(det, units, calls, outcomes, delta)
    if max_nudges is not None and not ev.nudge_param:
        raise TuningError(f"{type(det).__name__} voices every finding (no nudge_param): --max-nudges needs a guard "
                          "that can keep its first findings silent, e.g. progress_guard's nudge_after")
    if not any(outcomes.get(e) == "success" for e in ev.keys):
        raise TuningError("no episode with a successful run outcome: --objective deploy needs recorded outcomes "
                          "(e.g. --suite real-dev)")
    configured = int(getattr(det, ev.param))
    conf_nudge = int(getattr(det, ev.nudge_param)) if ev.nudge_param else 0
    log: list[str] = []
    best = min((ev.evaluate(v, {}) for v in ev.candidates), key=lambda s: s.key(cap))
    log.append(f"{ev.param} = {best.value} of {ev.candidates}")
    if per_tool:
        best = _per_tool(ev, best, "halt", lambda s: s.key(cap), log, max_passes)
    if max_nudges is not None:
        best = min((ev.evaluate(best.value, best.tools, n) for n in ev.candidates), key=lambda s: s.nudge_key(max_nudges))
        log.append(f"{ev.nudge_param} = {best.nudge_value} of {ev.candidates}")
        if per_tool:
            best = _per_tool(ev, best, "nudge", lambda s: s.nudge_key(max_nudges), log, max_passes)
    return DeployPick(ev.param, cap, best, ev.evaluate(configured, {}, conf_nudge), ev.candidates, log,
                      ev.nudge_param, max_nudges)


def loco(det: Detector, units: pd.DataFrame, calls: pd.DataFrame, outcomes: Mapping[str, str], cap: float, *,
         delta: int, per_tool: bool = True, max_nudges: float | None = None,
         unseen: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]] | None = None) -> list[dict[str, Any]]:
    """Leave one corpus (family) out: the pick made on the other corpora, scored on the held-out
    one; a last row ``pooled`` sums the held-out totals of every fold. ``overrides_applied``: how
    many of the fold's per-tool overrides name a tool the held-out corpus calls (an override of a
    tool it never calls cannot help or hurt it). ``unseen``: per corpus, the rows of that corpus
    scored by the detector without the rules written from it (``Detector.derived_from``): the
    pick is scored on those, as leave-one-corpus-out scores a detector whose rules came from the
    corpus it holds out (``held_out_as`` says which)."""
    corpora = sorted(set(units["family"].astype(str)))
    if len(corpora) < 2:
        raise TuningError(f"leave-one-corpus-out needs at least 2 corpora (families); the episodes have {len(corpora)}")
    rows, pooled, pooled_nudge = [], None, None
    shipped = shipped_nudge = None  # the configured setting, held out the same way: what the pick is worth against it
    for c in corpora:
        tu, tc = units[units["family"] != c], calls[calls["family"] != c]
        hu, hc = (unseen or {}).get(c) or (units[units["family"] == c], calls[calls["family"] == c])
        try:
            p = pick(det, tu, tc, outcomes, cap, delta=delta, per_tool=per_tool, max_nudges=max_nudges)
        except TuningError as exc:
            rows.append({"corpus": c, "setting": "", "note": str(exc)})
            continue
        evaluator = HaltEvaluator(det, hu, hc, outcomes, delta)
        held = evaluator.evaluate(p.picked.value, p.picked.tools, p.picked.nudge_value, p.picked.nudge_tools)
        pooled = held.totals if pooled is None else pooled + held.totals
        pooled_nudge = held.nudge if pooled_nudge is None else pooled_nudge + held.nudge
        conf = evaluator.evaluate(p.configured.value, p.configured.tools, p.configured.nudge_value, p.configured.nudge_tools)
        shipped = conf.totals if shipped is None else shipped + conf.totals
        shipped_nudge = conf.nudge if shipped_nudge is None else shipped_nudge + conf.nudge
        held_tools = set(hc["tool"].astype(str))
        per = set(p.picked.tools) | set(p.picked.nudge_tools)
        rows.append({"corpus": c, "setting": setting_text(p.param, p.picked, p.nudge_param), "met_on_others": p.met,
                     "overrides_applied": f"{sum(t in held_tools for t in per)}/{len(per)}",
                     "held_out_as": f"without {c}'s rules" if c in (unseen or {}) else "as shipped",
                     **_row(held), "note": ""})
    if pooled is not None:
        rows.append({"corpus": "pooled", "setting": "per fold", "met_on_others": None, "overrides_applied": "", "held_out_as": "",
                     **_row(Setting(0, {}, pooled, pooled_nudge)), "note": ""})
        rows.append({"corpus": CONFIGURED_POOLED, "setting": "as configured", "met_on_others": None, "overrides_applied": "",
                     "held_out_as": "", **_row(Setting(0, {}, shipped, shipped_nudge)), "note": ""})
    return rows


#: ``loco``'s last row: the detector as configured, scored on every held-out corpus as the pick is.
CONFIGURED_POOLED = "pooled, as configured"


def held_out_verdict(rows: Sequence[Mapping[str, Any]], cap: float) -> str:
    """One sentence from :func:`loco`'s pooled rows: is the pick, made on other corpora, worth
    adopting over the setting as configured on the corpora it was not made on?"""
    got = {r["corpus"]: r for r in rows if not r.get("note")}
    pick, conf = got.get("pooled"), got.get(CONFIGURED_POOLED)
    if pick is None or conf is None:
        return ""

    def pct(v):
        return "–" if v is None else f"{100 * v:.1f}%"

    if pick["successes_stopped"] is not None and pick["successes_stopped"] > cap + 1e-12:
        say = "the cap is not met held out: keep the configured setting, or pick with a lower cap"
    elif (pick["failed_calls_saved"] or 0.0) > (conf["failed_calls_saved"] or 0.0):
        say = "within the cap held out and it saves more: adopt it"
    else:
        say = "no saving over the configured setting held out: keep the configured setting"
    return (f"Held out, pooled: the pick made on the other corpora stops {pct(pick['successes_stopped'])} "
            f"({pick['successes']}) of the successful runs, saves {pct(pick['failed_calls_saved'])} of the failed runs' "
            f"calls and catches {pct(pick['runaway_caught'])} of the runaway loops; as configured, "
            f"{pct(conf['successes_stopped'])} ({conf['successes']}), {pct(conf['failed_calls_saved'])} and "
            f"{pct(conf['runaway_caught'])} — {say}.")


def _row(s: Setting) -> dict[str, Any]:
    f = s.figures
    out = {k: f[k] for k in HALT_FIGURES + NUDGE_FIGURES}
    out["successes"] = "{}/{}".format(*s.counts("succ_stopped", "succ"))
    out["runaway"] = "{}/{}".format(*s.counts("runaway_caught", "runaway"))
    out["failed_calls"] = "{}/{}".format(*s.counts("fail_calls_saved", "fail_calls"))
    return out


def setting_text(param: str, s: Setting, nudge_param: str | None = None) -> str:
    text = f"{param} = {s.value}" + "".join(f"; {t}: {v}" for t, v in sorted(s.tools.items()))
    if nudge_param and (s.nudge_value or s.nudge_tools):
        text += f"; {nudge_param} = {s.nudge_value}" + "".join(f"; {t}: {v}" for t, v in sorted(s.nudge_tools.items()))
    return text
