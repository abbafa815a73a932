"""``pingpong``: zeroclaw's ``LoopDetector`` — exact repeat ×3, A↔B ×4 cycles, same result ×5, each warn → block → break."""
from __future__ import annotations

from typing import Hashable, NamedTuple

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Message, Observation, ToolCall, Verdict, result_known
from ..signature import exact_signature, stable_hash
from ._common import is_user_turn

#: Full A,B cycles before the ping-pong rule speaks, and results before the no-progress rule does (zeroclaw's constants).
MIN_CYCLES = 4
MIN_SAME_RESULTS = 5


class Record(NamedTuple):
    tool: str
    args: str  # sorted-key JSON of the arguments (zeroclaw hashes them key-order independent)
    result: Hashable | None  # hash of the result text; None when the call did not run or its result is unknown


def _ladder(count: int, start: int) -> int:
    """0 below ``start``; 1 warn at ``start``; 2 block above it; 3 break from ``start + 2``."""
    if count >= start + 2:
        return 3
    if count > start:
        return 2
    return 1 if count >= start else 0


class PingPongDetector(Detector):
    """A no-progress guard of the zeroclaw kind (``crates/zeroclaw-runtime/src/agent/loop_detector.rs``).

    Over a sliding window of the last ``window_size`` (20) calls of the turn, in this order:

    1. **exact repeat** — the trailing run of calls with the same tool and arguments
       (key order ignored): warning at ``max_repeats`` (3), block above it, break at
       ``max_repeats + 2``;
    2. **ping-pong** — the window ends in full A,B pairs of two *tool names* (arguments
       ignored): warning at ``ping_pong_cycles`` (4) cycles, block above, break at +2;
    3. **no progress** — the newest call's tool and result text appear ``no_progress_calls``
       (5) times anywhere in the window with at least two different argument sets (the
       same arguments are exact-repeat territory): warning at 5, block above, break at +2.

    **Tiers**: a warning is a system nudge → ``nudge``; a block replaces the call's
    output with an error → ``prune``; a break ends the agent turn → ``stop``. zeroclaw's
    configuration names are ``loop_detection_enabled`` (``enabled``, default on),
    ``loop_detection_window_size`` and ``loop_detection_max_repeats``; the cycle and
    result counts are constants there (4 and 5) and parameters here. The detector lives
    for one ``run_tool_call_loop``: a user message starts a fresh one. Kumiho's
    guard and others of this kind use the same three rules with their own counts.

    **Mapping notes**: zeroclaw checks after a call ran, when its result is known. Rules
    1 and 2 need only the calls, so they fire on the call itself. Rule 3 needs the newest
    call's result, which a check before the call cannot see: it fires on the next
    proposed call, the first point a pre-call guard can act. A call our harness did not
    run still counts as a call, without a result. The score is the largest ratio of a
    rule's count to the count where it first warns, so the detector alarms iff
    ``score >= 1``.

    >>> det = PingPongDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(12):
    ...     call = ToolCall("read" if i % 2 == 0 else "write", {"attempt": i})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation(f"r{i}"))
    ...     out.append(d.verdict.value)
    >>> out[6:]
    ['allow', 'nudge', 'nudge', 'prune', 'prune', 'stop']
    """

    def __init__(self, *, window_size: int = 20, max_repeats: int = 3, ping_pong_cycles: int = MIN_CYCLES,
                 no_progress_calls: int = MIN_SAME_RESULTS, enabled: bool = True):
        for name, value in (("window_size", window_size), ("max_repeats", max_repeats),
                            ("ping_pong_cycles", ping_pong_cycles), ("no_progress_calls", no_progress_calls)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.window_size = window_size
        self.max_repeats = max_repeats
        self.ping_pong_cycles = ping_pong_cycles
        self.no_progress_calls = no_progress_calls
        self.enabled = enabled
        self._key = CallMemo(lambda call: exact_signature(call.tool, call.args))

    def start(self) -> tuple[Record, ...]:
        return ()

    @staticmethod
    def _cycles(window: list[Record]) -> int:
        """Full A,B pairs of tool names at the end of the window (0 when fewer than needed)."""
        if len(window) < 2 or window[-1].tool == window[-2].tool:
            return 0
        a, b = window[-1].tool, window[-2].tool
        cycles = 0
        for i in range(len(window) - 1, 0, -2):
            if window[i].tool == a and window[i - 1].tool == b:
                cycles += 1
            else:
                break
        return cycles

    def _no_progress(self, window: list[Record]) -> tuple[int, str]:
        if not window or window[-1].result is None:
            return 0, ""
        last = window[-1]
        same = [r for r in window if r.tool == last.tool and r.result == last.result]
        if len({r.args for r in same}) < 2:
            return 0, last.tool
        return len(same), last.tool

    def check(self, state: tuple[Record, ...], call: ToolCall) -> Decision:
        if not self.enabled:
            return Decision(Verdict.ALLOW, 0.0)
        key = self._key(call)
        current = Record(call.tool, key, None)
        window = (list(state) + [current])[-self.window_size:]
        run = 0
        for rec in reversed(window):
            if rec.tool != call.tool or rec.args != key:
                break
            run += 1
        cycles = self._cycles(window) if len(window) >= 2 * self.ping_pong_cycles else 0
        stuck, tool = self._no_progress(list(state)[-self.window_size:])
        rules = [
            (run / self.max_repeats, _ladder(run, self.max_repeats), "exact_repeat",
             f"tool '{call.tool}' called {run} times consecutively with identical arguments"),
            (cycles / self.ping_pong_cycles, _ladder(cycles, self.ping_pong_cycles), "ping_pong",
             f"tools '{window[-1].tool}' and '{window[-2].tool if len(window) > 1 else ''}' have been alternating for {cycles} cycles"),
            (stuck / self.no_progress_calls, _ladder(stuck, self.no_progress_calls), "no_progress",
             f"tool '{tool}' called {stuck} times with different arguments but identical results"),
        ]
        score = max(r[0] for r in rules)
        fired = next((r for r in rules if r[1]), None)
        if fired is None:
            return Decision(Verdict.ALLOW, score)
        _, level, name, text = fired
        event = ("loop_detection", {"detector": name, "level": ("warning", "block", "break")[level - 1]})
        if level == 1:
            return Decision(Verdict.NUDGE, score, message=f"Warning: {text}. Try a different approach.", reason=text, events=(event,))
        if level == 2:
            return Decision(Verdict.PRUNE, score, message=f"Blocked: {text}.", reason=text, events=(event,))
        return Decision(Verdict.STOP, score, reason=f"Circuit breaker: {text}", events=(event,))

    def record(self, state: tuple[Record, ...], call: ToolCall, decision: Decision, observation: Observation | None) -> tuple[Record, ...]:
        result = stable_hash(observation.content) if result_known(observation) else None
        return (state + (Record(call.tool, self._key(call), result),))[-self.window_size:]

    def on_message(self, state: tuple[Record, ...], message: Message) -> tuple[Record, ...]:
        return () if is_user_turn(message) else state
