"""``max_turns``: the plain turn budgets of LangGraph, the OpenAI Agents SDK and smolagents."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from ..protocol import Decision, Detector, Observation, ToolCall, Verdict
from ..params import Range


@dataclass(frozen=True, slots=True)
class TurnState:
    turns: int = 0  # model turns started on this path
    last_turn: Hashable = None  # the turn id of the previous call (None: unknown)


class MaxTurnsDetector(Detector):
    """Stop once the agent starts a model turn beyond ``max_turns``; no loop detection at all.

    The default, 10, is the OpenAI Agents SDK's ``DEFAULT_MAX_TURNS`` (raises
    ``MaxTurnsExceeded``). The same rail elsewhere: smolagents ``max_steps`` 20;
    LangChain ``AgentExecutor.max_iterations`` 15; CrewAI ``max_iter`` 25; Gemini CLI
    ``MAX_TURNS`` 100 per request chain; OpenHands ``max_iterations`` 500; goose
    ``DEFAULT_MAX_TURNS`` 1000; LangGraph ``recursion_limit`` 25 in the past, now 10007
    (it counts graph super-steps, about two per ReAct turn, so ``max_turns`` ≈ limit / 2).

    A turn is one model response. Calls proposed in one turn share ``ToolCall.turn``; a
    call without a turn id is its own turn (a plain ReAct transcript). The score is the
    number of turns started before this call's turn, so the calls of turn
    ``max_turns + 1`` are the first stopped.

    >>> det = MaxTurnsDetector(max_turns=2)
    >>> s = det.start()
    >>> verdicts = []
    >>> for i in range(3):
    ...     call = ToolCall("search", {"q": str(i)})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("r"))
    ...     verdicts.append(d.verdict.value)
    >>> verdicts
    ['allow', 'allow', 'stop']
    """

    threshold_param = "max_turns"
    param_ranges = {"max_turns": Range(1)}
    # Known conformance failures (detectors.testing), declared as data with the reason.
    expected_failures = {"check_catches_exact_repeat": "a turn budget, not a loop detector: it fires after "
                                                       "max_turns turns whatever they are"}

    def __init__(self, *, max_turns: int = 10):
        self.max_turns = max_turns

    def start(self) -> TurnState:
        return TurnState()

    @staticmethod
    def _new_turn(state: TurnState, call: ToolCall) -> bool:
        return call.turn is None or state.turns == 0 or call.turn != state.last_turn

    def check(self, state: TurnState, call: ToolCall) -> Decision:
        before = state.turns if self._new_turn(state, call) else state.turns - 1
        if before < self.max_turns:
            return Decision(Verdict.ALLOW, float(before))
        return Decision(
            Verdict.STOP,
            float(before),
            message=f"Max turns ({self.max_turns}) exceeded",
            reason=f"turn {before + 1} is beyond max_turns={self.max_turns}",
            events=(("max_turns:exceeded", {"max_turns": self.max_turns}),),
        )

    def record(self, state: TurnState, call: ToolCall, decision: Decision, observation: Observation | None) -> TurnState:
        if self._new_turn(state, call):
            return TurnState(state.turns + 1, call.turn)
        return state
