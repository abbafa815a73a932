"""``planner``: the plan cursor of seed 002.

The agent commits to an ordered plan up front (a ``plan`` on one of its messages);
each call names the step it executes. A call that redoes a finished step is refused
in band and redirected to the next open step; once every step is done the run ends.
Agents that declare no plan are never flagged.
"""
from __future__ import annotations

from dataclasses import dataclass

from .protocol import ALLOW_ZERO, Decision, Detector, Message, Observation, ToolCall, Verdict


@dataclass(frozen=True, slots=True)
class PlanState:
    steps: tuple[str, ...]
    done: frozenset[str]

    @property
    def complete(self) -> bool:
        return all(s in self.done for s in self.steps)

    def next_step(self) -> str | None:
        for s in self.steps:
            if s not in self.done:
                return s
        return None  # plan exhausted -> the loop exits


def refusal_text(step: str, next_step: str | None) -> str:
    """The seed's refusal and redirect, word for word."""
    return f"Planner: '{step}' is already done. Do '{next_step}' instead."


def progress_text(step: str, state: PlanState) -> str:
    """The seed's confirmation after a step is marked done."""
    return f"Planner: '{step}' complete. {len(state.done & set(state.steps))}/{len(state.steps)} done."


class PlannerDetector(Detector):
    """Refuse a redo of a finished plan step; stop once the plan is complete.

    A re-plan keeps what is already done: a sloppy new plan that lists a finished step
    again gets that step refused when the agent tries it.

    >>> det = PlannerDetector()
    >>> s = det.on_message(det.start(), Message("assistant", "plan", ("load", "clean", "plot")))
    >>> c = ToolCall("read_file", {"path": "a.csv"}, step="load")
    >>> s = det.record(s, c, det.check(s, c), Observation("rows"))
    >>> det.check(s, c).message
    "Planner: 'load' is already done. Do 'clean' instead."
    """

    # Known conformance failures (detectors.testing), declared as data with the reason.
    expected_failures = {"check_catches_exact_repeat": "judges plan steps only: a repeated call that names no "
                                                       "finished step is not its business"}

    def __init__(self, *, stop_when_complete: bool = True):
        self.stop_when_complete = stop_when_complete

    def start(self) -> PlanState | None:
        return None

    def on_message(self, state: PlanState | None, message: Message) -> PlanState | None:
        if not message.plan:
            return state
        done = state.done if state is not None else frozenset()
        return PlanState(tuple(message.plan), frozenset(s for s in done if s in message.plan) | (done - set(message.plan)))

    def check(self, state: PlanState | None, call: ToolCall) -> Decision:
        if state is None:
            return ALLOW_ZERO
        if self.stop_when_complete and state.complete:
            return Decision(Verdict.STOP, 1.0, reason=f"plan complete: all {len(state.steps)} steps done")
        step = call.step
        if step is None or step not in state.steps or step not in state.done:
            return ALLOW_ZERO
        return Decision(Verdict.NUDGE, 1.0, message=refusal_text(step, state.next_step()),
                        reason=f"step {step!r} is already done")

    def record(self, state: PlanState | None, call: ToolCall, decision: Decision, observation: Observation | None) -> PlanState | None:
        if state is None or observation is None or observation.nudge or decision.alarm:
            return state
        if call.step is None or call.step not in state.steps or call.step in state.done:
            return state
        return PlanState(state.steps, state.done | {call.step})
