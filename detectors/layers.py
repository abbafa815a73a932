"""The layered defences of seed 002: a hard step budget, a no-progress check, and a
``layered`` stack that combines guards gentlest-first and escalates to a human when the
agent keeps going after it was told to stop.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .pathmap import EMPTY, PathCounts
from .protocol import SEVERITY, Decision, Detector, Message, Observation, ToolCall, Verdict, nudge_only, ran, result_known
from .signature import content_text
from .params import ParamError, Range


class StepBudgetDetector(Detector):
    """The outermost rail: stop once a path has taken ``max_steps`` tool calls.

    Score = calls already made on the path, so the (max_steps + 1)-th call is stopped.
    """

    threshold_param = "max_steps"
    param_ranges = {"max_steps": Range(1)}
    # Known conformance failures (detectors.testing), declared as data with the reason.
    expected_failures = {"check_catches_exact_repeat": "a step budget, not a loop detector: it fires after "
                                                       "max_steps calls whatever they are"}

    def __init__(self, *, max_steps: int = 30):
        self.max_steps = max_steps

    def start(self) -> int:
        return 0

    def check(self, state: int, call: ToolCall) -> Decision:
        if state < self.max_steps:
            return Decision(Verdict.ALLOW, float(state))
        return Decision(Verdict.STOP, float(state), message=f"Step budget exhausted: {state} tool calls (max_steps={self.max_steps}).",
                        reason=f"max_steps={self.max_steps} reached")

    def record(self, state: int, call: ToolCall, decision: Decision, observation: Observation | None) -> int:
        return state + 1 if observation is not None and not observation.nudge else state


_WORD = re.compile(r"[^\W_]{2,}")


def information_tokens(content: Any) -> frozenset[str]:
    """The tokens (runs of two or more letters or digits) of an observation.

    Volatile bits (timestamps, request ids, durations) are tokens too; they are why an
    observation only counts as informative when a *share* of its tokens is new, not
    when any one is.
    """
    return frozenset(w.lower() for w in _WORD.findall(content_text(content, 200_000)))


@dataclass(frozen=True, slots=True)
class ProgressState:
    # A persistent set (structural sharing): a frozenset union per call would make a
    # tree's states cost nodes x depth.
    seen: PathCounts
    streak: int  # consecutive observations that added (almost) nothing


class NoProgressDetector(Detector):
    """Nudge after ``patience`` tool results in a row added no new information.

    An observation is informative when at least ``min_new_fraction`` of its words were
    never seen on the path before (and at least one is new). The score is the current
    streak of uninformative results, checked before the next call. A call that ran
    without a recorded result neither extends nor breaks the streak.
    """

    threshold_param = "patience"
    param_ranges = {"patience": Range(1), "min_new_fraction": Range(0, 1, float)}
    expected_failures = {"check_catches_unrecorded_repeat": "judges results only: without recorded results "
                                                            "there is no evidence of no progress"}

    def __init__(self, *, patience: int = 3, min_new_fraction: float = 0.1):
        self.patience = patience
        self.min_new_fraction = min_new_fraction

    def start(self) -> ProgressState:
        return ProgressState(EMPTY, 0)

    def check(self, state: ProgressState, call: ToolCall) -> Decision:
        if state.streak < self.patience:
            return Decision(Verdict.ALLOW, float(state.streak))
        return Decision(
            Verdict.NUDGE,
            float(state.streak),
            message=(f"No progress: the last {state.streak} tool results added no new information. "
                     f"Change your approach or give your best answer now."),
            reason=f"{state.streak} uninformative results in a row",
        )

    def record(self, state: ProgressState, call: ToolCall, decision: Decision, observation: Observation | None) -> ProgressState:
        if not result_known(observation):
            return state  # did not run, or ran without a recorded result: no evidence either way
        words = information_tokens(observation.content)
        new = state.seen.missing(words)
        informative = bool(new) and len(new) >= self.min_new_fraction * len(words)
        return ProgressState(state.seen.with_all(new) if new else state.seen, 0 if informative else state.streak + 1)


@dataclass(frozen=True, slots=True)
class LayeredState:
    layers: tuple[Any, ...]
    nudges: int  # nudges already given on this path


class LayeredDetector(Detector):
    """Stack guards gentlest-first and escalate when nudges do not help.

    Every layer is consulted; the most severe verdict wins. A nudge is given while
    fewer than ``escalate_after`` nudges were given on the path; the next alarm after
    that escalates to a human with the transcript. In the stack every layer is
    path-local, so repeats on sibling branches do not add up.

    The score is the largest ratio of a layer's score to its own threshold, so 1.0 is
    where the first layer trips.
    """

    param_ranges = {"escalate_after": Range(0)}

    def __init__(
        self,
        *,
        layers: Sequence[str] = ("normalized", "no_progress", "step_budget"),
        layer_params: Mapping[str, Mapping[str, Any]] | None = None,
        escalate_after: int = 2,
    ):
        self.layers = tuple(layers)
        self.layer_params = layer_params
        self.escalate_after = escalate_after
        from .registry import make_detector  # late: the registry imports this module's siblings

        params = layer_params or {}
        self._layers = []
        for name in self.layers:
            try:
                self._layers.append(make_detector(name, **dict(params.get(name, {}))))
            except ParamError as exc:  # name the value as the user wrote it
                raise ParamError(f"layer_params.{name}.{exc.param}", exc.value, exc.allowed) from None
        self._memo: tuple[Any, Any, list[Decision]] = (None, None, [])

    def start(self) -> LayeredState:
        return LayeredState(tuple(layer.start() for layer in self._layers), 0)

    def _layer_decisions(self, state: LayeredState, call: ToolCall) -> list[Decision]:
        # record() needs each layer's own decision for the call check() just judged;
        # keep them instead of asking every layer twice on the hot path.
        memo_state, memo_call, memo = self._memo
        if memo_state is state and memo_call is call:
            return memo
        decisions = [layer.check(sub, call) for layer, sub in zip(self._layers, state.layers)]
        self._memo = (state, call, decisions)
        return decisions

    def check(self, state: LayeredState, call: ToolCall) -> Decision:
        worst: Decision | None = None
        score = 0.0
        for layer, d in zip(self._layers, self._layer_decisions(state, call)):
            param = layer.threshold_param
            if param is not None:
                thr = layer.threshold_for(call.tool, getattr(layer, param))
                ratio = d.score / thr if thr not in (0, float("inf")) else (1.0 if d.alarm else 0.0)
            else:
                ratio = 1.0 if d.alarm else 0.0
            score = max(score, ratio)
            if d.alarm and (worst is None or SEVERITY[d.verdict] > SEVERITY[worst.verdict]):
                worst = d
        if worst is None:
            return Decision(Verdict.ALLOW, score)
        if worst.verdict is Verdict.NUDGE and state.nudges >= self.escalate_after:
            return Decision(
                Verdict.ESCALATE,
                score,
                message=(f"Escalating to a human: the guards fired {state.nudges + 1} times and the agent "
                         f"has not changed course. Last: {worst.reason}."),
                reason=f"escalated after {state.nudges} nudges: {worst.reason}",
                events=worst.events,
            )
        return Decision(worst.verdict, score, worst.message, worst.reason, worst.events, worst.stream)

    def record(self, state: LayeredState, call: ToolCall, decision: Decision, observation: Observation | None) -> LayeredState:
        subs = []
        for layer, sub, d in zip(self._layers, state.layers, self._layer_decisions(state, call)):
            subs.append(layer.record(sub, call, d, observation))
        # a re-view that ran beside its nudge is no sign the nudges do not help (``review_nudges``)
        counted = decision.verdict is Verdict.NUDGE and not (ran(observation) and nudge_only(decision))
        return LayeredState(tuple(subs), state.nudges + counted)

    def on_message(self, state: LayeredState, message: Message) -> LayeredState:
        return LayeredState(tuple(layer.on_message(sub, message) for layer, sub in zip(self._layers, state.layers)), state.nudges)
