"""``deepagents``: pydantic-deepagents' ``StuckLoopDetection`` — repeats, A-B-A-B, same result (tool + result hash)."""
from __future__ import annotations

from typing import Hashable, NamedTuple

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Message, Observation, ToolCall, Verdict, result_known
from ..signature import exact_signature, stable_hash
from ._common import is_user_turn


class Step(NamedTuple):
    call: tuple[str, str]  # (tool, sorted-key JSON of the arguments)
    result: tuple[str, Hashable] | None  # (tool, hash of the result); None when the call did not run or its result is unknown


def _trailing_equal(items: list) -> int:
    if not items:
        return 0
    last, n = items[-1], 0
    for item in reversed(items):
        if item != last:
            break
        n += 1
    return n


def _trailing_alternation(items: list) -> int:
    """Length of the trailing A,B,A,B,… stretch (A ≠ B); 0 when the last two are equal."""
    if len(items) < 2 or items[-1] == items[-2]:
        return 0
    a, b, n = items[-1], items[-2], 0
    for item in reversed(items):
        if item != (a if n % 2 == 0 else b):
            break
        n += 1
    return n


class DeepAgentsDetector(Detector):
    """pydantic-deepagents' stuck-loop capability (``pydantic_deep/capabilities/stuck_loop.py``).

    Three patterns over the run's tool calls, with ``max_repeated`` = N (default 3, at
    least 2):

    1. **repeated** (``detect_repeated``) — the last N calls identical: tool name + hash
       of the arguments' sorted-key JSON;
    2. **alternating** (``detect_alternating``) — the last 2N calls alternate between two
       different calls, A-B-A-B (N cycles);
    3. **no-op** (``detect_noop``) — the last N results identical: tool name + hash of the
       result (the text itself, or its sorted-key JSON), whatever the arguments.

    They are checked in that order; the first that holds decides. ``action`` is the
    project's: ``"warn"`` raises ``ModelRetry`` (the model gets "You called `grep` with
    identical arguments 3 times in a row. Try a different approach." instead of the
    result) → ``nudge``; ``"error"`` raises ``StuckLoopError`` and aborts the run →
    ``stop``. State is per run (``for_run``): a user message starts a new one. The
    capability is on by default in ``create_deep_agent`` (``stuck_loop_detection=True``);
    ``enabled=False`` turns it off.

    **Mapping notes**: the project checks in ``after_tool_execute``, once the call ran.
    The repeated and alternating patterns need only the calls, so here they fire on the
    N-th call itself (its result is replaced by the retry message in both). The no-op
    pattern needs the N-th call's *result*, which a check before the call cannot see: it
    fires on the next proposed call, the first point a pre-call guard can act. A call
    our harness did not run still counts as a call but has no result. Scores: the largest
    of repeated-run / N, alternation / 2N and result-run / N, so the detector alarms iff
    ``score >= 1``.

    >>> det = DeepAgentsDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(4):
    ...     call = ToolCall("grep", {"pattern": "foo"})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation(f"match {i}"))
    ...     out.append(d.verdict.value)
    >>> out
    ['allow', 'allow', 'nudge', 'nudge']
    """

    def __init__(self, *, max_repeated: int = 3, action: str = "warn", detect_repeated: bool = True,
                 detect_alternating: bool = True, detect_noop: bool = True, enabled: bool = True):
        if max_repeated < 2:
            raise ValueError(f"max_repeated must be at least 2, got {max_repeated}")
        if action not in ("warn", "error"):
            raise ValueError(f"action must be 'warn' or 'error', got {action!r}")
        self.max_repeated = max_repeated
        self.action = action
        self.detect_repeated = detect_repeated
        self.detect_alternating = detect_alternating
        self.detect_noop = detect_noop
        self.enabled = enabled
        self._keep = 2 * max_repeated
        self._key = CallMemo(lambda call: (call.tool, exact_signature(call.tool, call.args)))

    def start(self) -> tuple[Step, ...]:
        return ()

    def check(self, state: tuple[Step, ...], call: ToolCall) -> Decision:
        if not self.enabled:
            return Decision(Verdict.ALLOW, 0.0)
        n = self.max_repeated
        calls = [s.call for s in state] + [self._key(call)]
        results = [s.result for s in state]
        known = results if results and results[-1] is not None else []
        rules = []
        if self.detect_repeated:
            run = _trailing_equal(calls)
            rules.append((run / n, "repeated", f"You called `{call.tool}` with identical arguments {run} times in a row."))
        if self.detect_alternating:
            alt = _trailing_alternation(calls)
            rules.append((alt / (2 * n), "alternating",
                          f"You're alternating between `{calls[-1][0]}` and `{calls[-2][0] if len(calls) > 1 else ''}` "
                          f"in a loop ({alt // 2} cycles)."))
        if self.detect_noop:
            same = _trailing_equal(known)
            tool = known[-1][0] if known else ""
            rules.append((same / n, "noop", f"`{tool}` returned the same result {same} times in a row."))
        if not rules:
            return Decision(Verdict.ALLOW, 0.0)
        score = max(r[0] for r in rules)
        fired = next((r for r in rules if r[0] >= 1.0), None)
        if fired is None:
            return Decision(Verdict.ALLOW, score)
        _, pattern, text = fired
        event = ("stuck_loop", {"pattern": pattern, "action": self.action})
        if self.action == "error":
            return Decision(Verdict.STOP, score, reason=f"StuckLoopError({pattern}): {text}", events=(event,))
        return Decision(Verdict.NUDGE, score, message=f"{text} Try a different approach.", reason=f"{pattern}: {text}",
                        events=(event,))

    def record(self, state: tuple[Step, ...], call: ToolCall, decision: Decision, observation: Observation | None) -> tuple[Step, ...]:
        result = (call.tool, stable_hash(observation.content)) if result_known(observation) else None
        return (state + (Step(self._key(call), result),))[-self._keep:]

    def on_message(self, state: tuple[Step, ...], message: Message) -> tuple[Step, ...]:
        return () if is_user_turn(message) else state
