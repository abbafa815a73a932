"""Per-tool overrides within a false-alarm budget.

:func:`tune` looks for per-tool overrides (``tool_overrides``) that keep the false-alarm
rate on clean episodes within a budget with the fewest misses: coordinate search over
tools, from the configured setting, one candidate override per tool at a time, until a
whole pass changes nothing. The candidates are the detector's own (``tune_candidates``, a
hook of :class:`detectors.protocol.Detector`). Overrides of keys that only move the alarm
threshold (``tune_fast_keys``: ``score >= threshold_for(tool, value)``, e.g. ``exact``'s
``max_repeats`` and ``exempt``) are evaluated from stored scores; every other candidate is re-run.
"""
from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np


from sim.execute.engines import Engine
from sim.config.spec import DetectorSpec
from sim.scoring.outcomes import DELTA, Outcome, ScoringUnits, units_by_id
from sim.scoring.thresholds import CallScores, check_contract
from scenarios.tree import Episode


from sim.tuning.evaluate import call_scores, run_specs
from sim.tuning.params import Overrides, TuningError
from sim.tuning.toml_out import toml_value
from sim.numbers import number_text


# -- tuning per-tool overrides ---------------------------------------------------------------------
def tool_candidates(cls: type) -> tuple[dict[str, tuple], tuple[str, ...]]:
    """(per-tool key -> candidate values, keys evaluable from stored scores) for a detector class."""
    if "tool_overrides" not in cls.param_names():
        raise TuningError(f"{cls.__name__} takes no tool_overrides, so there is nothing to tune per tool "
                          f"(detectors that can: {', '.join(tunable_detectors()) or 'none'})")
    own = getattr(cls, "tune_candidates", None)  # the hook of detectors.protocol.Detector
    if own:
        return {k: tuple(v) for k, v in own.items()}, tuple(getattr(cls, "tune_fast_keys", ()))
    raise TuningError(f"{cls.__name__} takes tool_overrides but declares no per-tool candidates; give the class "
                      "tune_candidates = {KEY: (VALUES...)} (and tune_fast_keys for threshold-only keys)")


def tunable_detectors() -> list[str]:
    from detectors.registry import available, detector_class

    out = []
    for name in available():
        try:
            if "tool_overrides" in detector_class(name).param_names():
                out.append(name)
        except Exception:  # noqa: BLE001 — a broken plug-in must not hide the others
            pass
    return out




def _canon(o: Overrides) -> str:
    return json.dumps(o, sort_keys=True, default=repr)


@dataclass
class Evaluation:
    """How one override setting does on the tuning episodes."""

    outcomes: list[Outcome]
    alarms: int  # alarmed calls (more = less permissive)
    counts: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.counts = Counter(o.outcome for o in self.outcomes)

    @property
    def clean(self) -> int:
        return self.counts["tn"] + self.counts["fp"]

    def key(self, budget: float) -> tuple:
        """Lexicographic: false alarms over the budget, misses, early alarms, then strictest."""
        c = self.counts
        excess = max(0.0, c["fp"] - budget * self.clean)
        return (round(excess, 9), c["miss"], c["early"], -self.alarms)

    @property
    def far(self) -> float | None:
        return self.counts["fp"] / self.clean if self.clean else None

    def misses_by_family(self) -> Counter:
        return Counter(o.family for o in self.outcomes if o.outcome == "miss")

    def adds_misses(self, than: "Evaluation") -> bool:
        """True when some family has more misses here than in ``than``."""
        mine, theirs = self.misses_by_family(), than.misses_by_family()
        return any(n > theirs.get(f, 0) for f, n in mine.items())


class Evaluator:
    """Outcomes of override settings on fixed episodes, re-running the detector only when it must."""

    def __init__(self, spec: DetectorSpec, episodes: Sequence[Episode], fast_keys: Sequence[str], *,
                 delta: int = DELTA, engine: Engine | int = 0, progress: bool = False):
        self.spec, self.episodes, self.delta, self.engine, self.progress = spec, list(episodes), delta, engine, progress
        base = spec.build()
        self.tp = base.threshold_param
        self.value = getattr(base, self.tp) if self.tp else None
        self.fast_keys = set(fast_keys) if self.tp else set()
        self.units = units_by_id(self.episodes)
        self.runs: dict[str, tuple[CallScores, dict[str, str]]] = {}
        self.memo: dict[str, dict[bytes, list[Outcome]]] = defaultdict(dict)
        self.open_runs = 0
        self.notes: list[str] = []
        self.tools = sorted({n.call.tool for ep in self.episodes for n in ep.tool_nodes()})
        self._tool_index = {t: i for i, t in enumerate(self.tools)}
        self._ep_tools: dict[str, np.ndarray] = {}

    def _slow(self, o: Overrides) -> Overrides:
        out = {t: {k: v for k, v in e.items() if k not in self.fast_keys} for t, e in o.items()}
        return {t: e for t, e in out.items() if e}

    def _spec(self, label: str, o: Overrides) -> DetectorSpec:
        return DetectorSpec(label, self.spec.spec, {**self.spec.params, "tool_overrides": o or None})

    def evaluate(self, settings: Sequence[Overrides]) -> list[Evaluation]:
        keys = [_canon(self._slow(o)) for o in settings]
        todo = {k: self._slow(o) for k, o in zip(keys, settings) if k not in self.runs}
        if todo:
            specs = {k: self._spec(f"run{i}", o) for i, (k, o) in enumerate(todo.items())}
            results = run_specs(list(specs.values()), self.episodes, self.engine, self.progress)
            self.open_runs += len(specs)
            for k, s in specs.items():
                res = results[s.label]
                cs = call_scores(res, self.episodes)
                if self.fast_keys:
                    det = s.build()
                    bad, total = check_contract(det, cs, self.value)
                    if bad:  # the shortcut is not valid for this detector: re-run every setting
                        self.notes.append(f"{bad} of {total} stored verdicts disagree with score >= threshold_for; "
                                          "every candidate was re-run")
                        self.fast_keys = set()
                        self.runs.clear()
                        return self.evaluate(settings)
                self.runs[k] = (cs, dict(res.errors))
        return [self._evaluate_one(o, k) for o, k in zip(settings, keys)]

    def _evaluate_one(self, o: Overrides, run_key: str) -> Evaluation:
        cs, errors = self.runs[run_key]
        if self.fast_keys:
            det = self._spec("eval", o).build()
            thr = np.array([float(det.threshold_for(t, self.value)) for t in self.tools])
        outcomes: list[Outcome] = []
        alarms = 0
        for eid, u in self.units.items():
            if eid in errors or eid not in cs.by_episode:
                outcomes += u.outcomes({}, self.delta, error=errors.get(eid, "no stored scores for this episode"))
                continue
            nodes, scores, tools = cs.by_episode[eid]
            if self.fast_keys:
                idx = self._ep_tools.get(eid)
                if idx is None:
                    idx = self._ep_tools[eid] = np.array([self._tool_index[t] for t in tools], dtype=int)
                alarm = scores >= thr[idx]
            else:
                alarm = cs.verdict_alarm[eid]
            alarms += int(alarm.sum())
            memo = self.memo[eid]
            kb = alarm.tobytes()
            if kb not in memo:
                memo[kb] = u.outcomes(dict(zip(nodes, alarm.tolist())), self.delta)
            outcomes += memo[kb]
        return Evaluation(outcomes, alarms)


@dataclass
class TuneStep:
    pass_no: int
    tool: str
    setting: dict[str, Any] | None  # None: back to the configured setting
    far: float | None
    misses: int


@dataclass
class TuneResult:
    label: str
    budget: float
    base: Overrides
    tuned: Overrides
    base_eval: Evaluation
    tuned_eval: Evaluation
    steps: list[TuneStep]
    passes: int
    open_runs: int
    fast: bool
    notes: list[str]

    @property
    def changed(self) -> Overrides:
        """The tools whose setting the search changed."""
        tools = set(self.base) | set(self.tuned)
        return {t: self.tuned.get(t, {}) for t in sorted(tools) if self.base.get(t) != self.tuned.get(t)}

    @property
    def met(self) -> bool:
        far = self.tuned_eval.far
        return far is not None and far <= self.budget + 1e-12


def _with_tool(current: Overrides, tool: str, setting: dict | None, base: Overrides) -> Overrides:
    out = {t: dict(e) for t, e in current.items()}
    if setting is None:
        if tool in base:
            out[tool] = dict(base[tool])
        else:
            out.pop(tool, None)
    else:
        out[tool] = dict(setting)
    return out


def tune(spec: DetectorSpec, episodes: Sequence[Episode], budget: float, *, delta: int = DELTA, engine: Engine | int = 0,
         tools: Sequence[str] | None = None, keep_misses: bool = False, max_passes: int = 6, progress: bool = False,
         log: Callable[[str], None] = lambda s: None) -> TuneResult:
    """Coordinate search for per-tool overrides within a false-alarm budget (module docstring).

    With ``keep_misses`` a setting that gives any family more misses than the configured
    setting is never taken, even when the budget is then not met.
    """
    from detectors.registry import detector_class

    cands, fast_keys = tool_candidates(detector_class(spec.spec))
    ev = Evaluator(spec, episodes, fast_keys, delta=delta, engine=engine, progress=progress)
    base: Overrides = {t: dict(e) for t, e in (spec.params.get("tool_overrides") or {}).items()}
    unknown = [t for t in (tools or ()) if t not in ev.tools]
    if unknown:
        raise TuningError(f"--tools: {', '.join(unknown)} never called in the tuning episodes "
                          f"(tools called: {', '.join(ev.tools)})")
    base_eval = ev.evaluate([base])[0]
    # Tools behind the most false alarms first: the search then settles in fewer passes.
    node_tool = {(ep.id, n.id): n.call.tool for ep in episodes for n in ep.tool_nodes()}
    blame = Counter(_first_alarm_tool(ev.units[o.episode], o, node_tool) for o in base_eval.outcomes
                    if o.outcome in ("fp", "early") and o.first_alarm is not None)
    order = sorted(tools or ev.tools, key=lambda t: (-blame.get(t, 0), t))
    options: list[dict | None] = [None] + [{k: v} for k, vals in cands.items() for v in vals]
    current, cur_eval = base, base_eval
    steps: list[TuneStep] = []
    passes = 0
    for passes in range(1, max_passes + 1):
        changed = False
        for tool in order:
            trials = [_with_tool(current, tool, opt, base) for opt in options]
            evals = ev.evaluate(trials)
            keys = [(math.inf,) if keep_misses and e.adds_misses(base_eval) else e.key(budget) + (i,)
                    for i, e in enumerate(evals)]
            cur = next((i for i, t in enumerate(trials) if t == current), None)
            cur_key = keys[cur] if cur is not None else cur_eval.key(budget) + (len(trials),)
            best = min(range(len(trials)), key=keys.__getitem__)
            if keys[best] < cur_key:
                current, cur_eval, changed = trials[best], evals[best], True
                steps.append(TuneStep(passes, tool, options[best], cur_eval.far, cur_eval.counts["miss"]))
                log(f"pass {passes}: {tool} -> {_setting_text(options[best])} (false-alarm rate "
                    f"{number_text(cur_eval.far, pct=True)}, {cur_eval.counts['miss']} misses)")
        if not changed:
            break
    return TuneResult(spec.label, budget, base, current, base_eval, cur_eval, steps, passes, ev.open_runs,
                      bool(ev.fast_keys), ev.notes)


def _first_alarm_tool(u: ScoringUnits, o: Outcome, node_tool: Mapping[tuple[str, str], str]) -> str:
    """The tool of the call that raised an outcome's first alarm."""
    if o.unit == "episode":
        node = next((n for n, i in u.clean if i == o.first_alarm), None)
    else:
        path = next((calls for leaf, calls, _ in u.looping if leaf == o.unit), ())
        node = path[o.first_alarm] if o.first_alarm is not None and o.first_alarm < len(path) else None
    return node_tool.get((o.episode, node), "") if node else ""


def _setting_text(setting: Mapping[str, Any] | None) -> str:
    if not setting:
        return "as configured"
    return ", ".join(f"{k} = {toml_value(v)}" for k, v in setting.items())


def setting_text(setting: Mapping[str, Any] | None) -> str:
    """A tool's override as TOML assignments."""
    return _setting_text(setting)


