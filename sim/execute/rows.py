"""The rows of a run's result files, made from detector tasks' results: per-family metrics,
per-unit outcomes and per-call lines of the open loop, per-episode and per-family rows of the
closed loop, and the files' columns."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, fields
from typing import Mapping, Sequence

from scenarios.base import Scenario
from scenarios.tree import Episode
from sim.execute.tasks import OpenResult
from sim.files import csv_field, fmt
from sim.play.harness import ClosedLoopStats
from sim.scoring.outcomes import (VERDICT_TEXT, Outcome, ScoringUnits, advisory_rate, alarms_from, composite,
                                  scoring_units, summarize, units_by_id)

CALL_COLUMNS = ["detector", "episode", "family", "call_id", "node", "call_index", "depth", "tool", "score", "verdict",
                "label_loop", "label_kind", "tokens"]
EPISODE_COLUMNS = ["detector", "episode", "family", "unit", "outcome", "onset", "first_alarm", "delay", "late", "error",
                   "run_outcome", "persistence", "to_end", "severity"]
METRIC_COLUMNS = ["detector", "family", "episodes", "tn", "fp", "early", "tp", "miss", "late", "errors",
                  "false_alarm_rate", "miss_rate", "early_rate", "recall", "precision", "f1", "median_delay",
                  "mean_delay", "alarms_per_1k", "score_standard", "score_low_FP", "score_low_FN",
                  "recall_runaway", "recall_blip"]
TIMING_COLUMNS = ["detector", "mode", "checks", "p50_us", "p95_us", "mean_us", "total_s", "model_calls", "cache_hit_rate"]
_OUTCOME_FIELDS = tuple(f.name for f in fields(Outcome))
CLOSED_COLUMNS = ["detector", "episode", "family", "ended", "success", "executed", "wasted_calls", "wasted_spend",
                  "spend", "nudge", "prune", "escalate", "stop", "false_interventions", "error"]
#: The closed-loop reference row: every scenario played with no guard at all.
NO_GUARD = "no_guard"
CLOSED_METRIC_COLUMNS = ["detector", "family", "episodes", "success_rate", "wasted_calls", "wasted_spend", "spend",
                         "interventions", "nudges", "prunes", "escalations", "stops", "false_interventions",
                         "errors", "ended"]


def metric_rows(label: str, episodes: Sequence[Episode], res: OpenResult, delta: int,
                profiles: dict[str, dict[str, float]],
                units: Mapping[str, ScoringUnits] | None = None) -> tuple[list[dict], list[dict]]:
    """Metric rows (per family and ``all``) and outcome rows of one detector's open-loop result.

    ``units``: the episodes' scoring units by id, when the caller scores several detectors
    over the same episodes and builds them once.
    """
    by_family: dict[str, list[Outcome]] = defaultdict(list)
    outcome_rows = []
    for ep in episodes:
        u = units[ep.id] if units is not None else scoring_units(ep)
        if ep.id in res.errors:
            outs = u.outcomes({}, delta, error=res.errors[ep.id])
        else:
            outs = u.outcomes(alarms_from(res.scores[ep.id]), delta)
        for o in outs:
            by_family[o.family].append(o)
            row = {"detector": label}
            for f in _OUTCOME_FIELDS:  # dataclasses.asdict deep-copies: a noticeable share of a run
                row[f] = getattr(o, f)
            outcome_rows.append(row)
    rows = []
    fam_eps: dict[str, list[Episode]] = defaultdict(list)
    for ep in episodes:
        fam_eps[ep.family].append(ep)
    groups = [(f, by_family[f], fam_eps[f]) for f in sorted(by_family)]
    groups.append(("all", [o for f in sorted(by_family) for o in by_family[f]], list(episodes)))
    for fam, outs, eps in groups:
        row = {"detector": label, "family": fam, **summarize(outs, delta)}
        alarms, calls = advisory_rate(eps, res.scores)
        row["alarms_per_1k"] = 1000.0 * alarms / calls if calls else None
        for pname, w in profiles.items():
            row[f"score_{pname}"] = composite(outs, w, delta) if any(o.outcome != "unlabelled" for o in outs) else None
        rows.append(row)
    return rows, outcome_rows


def closed_rows(label: str, scenarios: Sequence[Scenario], stats: dict[str, ClosedLoopStats]) -> tuple[list[dict], list[dict]]:
    per_ep = []
    for sc in scenarios:
        st = stats[sc.id]
        per_ep.append({
            "detector": label, "episode": sc.id, "family": sc.family, "ended": st.ended, "success": st.success,
            "executed": st.executed, "wasted_calls": st.wasted_calls, "wasted_spend": st.wasted_spend, "spend": st.spend,
            "nudge": st.interventions.get("nudge", 0), "prune": st.interventions.get("prune", 0),
            "escalate": st.interventions.get("escalate", 0), "stop": st.interventions.get("stop", 0),
            "false_interventions": st.false_interventions, "error": st.detector_error,
        })
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in per_ep:
        groups[r["family"]].append(r)
    out = []
    for fam, rs in [(f, groups[f]) for f in sorted(groups)] + [("all", per_ep)]:
        ended = Counter(r["ended"] for r in rs)
        out.append({
            "detector": label, "family": fam, "episodes": len(rs),
            "success_rate": sum(r["success"] for r in rs) / len(rs),
            "wasted_calls": sum(r["wasted_calls"] for r in rs), "wasted_spend": sum(r["wasted_spend"] for r in rs),
            "spend": sum(r["spend"] for r in rs),
            "interventions": sum(r["nudge"] + r["prune"] + r["escalate"] + r["stop"] for r in rs),
            "nudges": sum(r["nudge"] for r in rs), "prunes": sum(r["prune"] for r in rs),
            "escalations": sum(r["escalate"] for r in rs), "stops": sum(r["stop"] for r in rs),
            "false_interventions": sum(r["false_interventions"] for r in rs),
            "errors": sum(1 for r in rs if r["error"]),
            "ended": ";".join(f"{k}={v}" for k, v in sorted(ended.items())),
        })
    return out, per_ep


def call_cells(episodes: Sequence[Episode]) -> dict[tuple[str, str], tuple[str, str, str]]:
    """Per tool node, by ``(episode id, node id)``: its ``calls.csv`` fields that do not depend
    on the detector, as CSV text made once for every detector: episode, family, call id and
    node; the tool; the labels (trace text, so quoted where a field needs it) with the call's
    tokens (``ToolNode.tokens``, 0 where the trace records none)."""
    out = {}
    for ep in episodes:
        head = f"{csv_field(ep.id)},{csv_field(ep.family)},"
        for n in ep.tool_nodes():
            labels = (f"{csv_field(fmt(n.label.loop))},{csv_field(fmt(n.label.kind))}" if n.label else ",") \
                + f",{int(n.tokens)}"
            out[(ep.id, n.id)] = (f"{head}{csv_field(fmt(n.call.call_id))},{csv_field(n.id)}",
                                  csv_field(fmt(n.call.tool)), labels)
    return out


def open_rows(label: str, res: OpenResult, episodes: Sequence[Episode], delta: int,
              profiles: dict[str, dict[str, float]], cells: dict | None = None,
              units: Mapping[str, ScoringUnits] | None = None):
    """Metrics and outcome rows of one detector's open-loop result, and its ``calls.csv`` lines
    (``CALL_COLUMNS``) as one text. There are 810k such lines on the default suite with every
    detector: put together from the per-call fields of ``call_cells``, made once for all
    detectors, rather than written cell by cell through ``csv`` (2.9–3.1 s to write in the
    parent of a warm default run before, 0.3 s now)."""
    metrics, outcomes = metric_rows(label, episodes, res, delta, profiles, units)
    cells = cells if cells is not None else call_cells(episodes)
    name = csv_field(label)
    verdict = {v: csv_field(text) for v, text in VERDICT_TEXT.items()}
    score_text: dict[float, str] = {}  # a detector's scores take few distinct values
    lines = []
    for ep in episodes:  # episode order, not completion order: files stay deterministic
        for s in res.scores.get(ep.id, ()):
            head, tool, labels = cells[(ep.id, s.node_id)]
            score = score_text.get(s.score)
            if score is None:
                score = score_text[s.score] = csv_field(fmt(s.score))
            lines.append(f"{name},{head},{s.call_index},{s.depth},{tool},{score},{verdict[s.verdict]},{labels}\n")
    return metrics, outcomes, "".join(lines)


@dataclass
class OpenRows:
    """A detector's open-loop task as the rows it adds to the result files."""

    metrics: list[dict]
    outcomes: list[dict]
    calls: str  # its calls.csv lines
    errors: int  # episodes it failed on


@dataclass
class ClosedRows:
    """A detector's closed-loop task as the rows it adds to the result files."""

    metrics: list[dict]
    episodes: list[dict]


class RowMaker:
    """A finished task's ``(result, timing)`` -> ``(rows, timing)``: :class:`OpenRows` or
    :class:`ClosedRows` in place of the raw result (rows come back as they are).

    The local pool's workers call it as each task ends, so the parent receives rows and one
    text per detector instead of unpickling every call's score and building the rows after
    the last task (on the default suite, 810k scores: 2.1-2.6 s to unpickle and 2.6-4.5 s to
    build, serially, in the parent). The per-call cells it needs are made on first use,
    once per process, and so are the scoring units unless the caller gives them.
    """

    def __init__(self, episodes: Sequence[Episode], scenarios: Sequence[Scenario], delta: int,
                 profiles: dict[str, dict[str, float]], units: Mapping[str, ScoringUnits] | None = None) -> None:
        self.episodes, self.scenarios, self.delta, self.profiles = episodes, scenarios, delta, profiles
        self._cells: dict | None = None
        self._units = units  # the episodes' scoring units by id, when the caller has them

    def __call__(self, key: tuple[str, str], value: tuple) -> tuple:
        kind, label = key
        result, timing = value
        if isinstance(result, (OpenRows, ClosedRows)):
            return value
        if kind == "closed":
            return ClosedRows(*closed_rows(label, self.scenarios, result)), timing
        if self._cells is None:
            self._cells = call_cells(self.episodes)
        if self._units is None:
            self._units = units_by_id(self.episodes)
        metrics, outcomes, calls = open_rows(label, result, self.episodes, self.delta, self.profiles, self._cells,
                                             self._units)
        return OpenRows(metrics, outcomes, calls, len(result.errors)), timing
