"""A drop-in loop guard for a real harness, without the simulator.

>>> from detectors.guard import LoopGuard
>>> guard = LoopGuard(semantic=False)
>>> guard.check("search", {"query": "q3 revenue"}).verdict.value
'allow'
>>> guard.record("search", {"query": "q3 revenue"}, "3 results: [D1] Revenue Q3 ...")
>>> d = guard.check("search", {"query": "Q3 Revenue "})
>>> d.verdict.value, d.reason.split(":")[0]
('nudge', 'loop-guard')

``check`` before the tool runs; act on ``decision.verdict`` (``allow``: run it; ``nudge``:
don't run it, give ``decision.message`` to the model as the tool's result; ``prune``:
drop it; ``stop``/``escalate``: end the run and surface ``decision.reason``); then
``record`` what happened. ``fork()`` gives a branch its own guard that shares the
history so far (the state is immutable, so forking is free).
"""
from __future__ import annotations

from typing import Any, Mapping

from .protocol import Decision, Detector, Message, Observation, ToolCall, Verdict, unrecorded


class LoopGuard:
    """One conversation's guard: a detector plus its current state.

    ``detector`` is any loopbench detector (default: ``ProgressGuard(**params)``, the
    recommended one).
    """

    def __init__(self, detector: Detector | None = None, **params: Any):
        if detector is None:
            from .progress_guard import ProgressGuard

            detector = ProgressGuard(**params)
        elif params:
            raise TypeError("pass parameters to the detector you construct, or no detector")
        self.detector = detector
        self.state = detector.start()
        self._pending: dict[int, Decision] = {}

    @staticmethod
    def _call(tool: str | ToolCall, args: Mapping[str, Any] | None) -> ToolCall:
        if isinstance(tool, ToolCall):
            return tool
        return ToolCall(tool, dict(args or {}))

    def check(self, tool: str | ToolCall, args: Mapping[str, Any] | None = None) -> Decision:
        """The verdict for a call the model proposed, before it runs."""
        call = self._call(tool, args)
        decision = self.detector.check(self.state, call)
        self._pending[_key(call)] = decision
        return decision

    def record(self, tool: str | ToolCall, args: Mapping[str, Any] | None = None, result: Any = None,
               error: bool = False, decision: Decision | None = None) -> None:
        """What happened to the call: its result (or the nudge text you returned instead).

        ``result=None`` says the call ran but you have no result for it (no reply came);
        the guard then counts the call without reading anything into its result.
        """
        call = self._call(tool, args)
        decision = decision or self._pending.pop(_key(call), None) or self.detector.check(self.state, call)
        if decision.verdict is Verdict.NUDGE:
            obs: Observation | None = Observation(decision.message or "", nudge=True)
        elif decision.verdict is Verdict.ALLOW:
            obs = unrecorded(bool(error)) if result is None else Observation(result, bool(error))
        else:
            obs = None  # pruned or stopped: it never ran
        self.state = self.detector.record(self.state, call, decision, obs)

    def message(self, role: str, content: str = "", plan: list[str] | None = None) -> None:
        """A message on the conversation (a user turn, the model's text, a declared plan)."""
        self.state = self.detector.on_message(self.state, Message(role, content, tuple(plan) if plan else None))

    def fork(self) -> "LoopGuard":
        twin = LoopGuard.__new__(LoopGuard)
        twin.detector, twin.state, twin._pending = self.detector, self.state, {}
        return twin


def _key(call: ToolCall) -> int:
    from .signature import stable_hash

    return hash((call.tool, stable_hash(call.args)))
