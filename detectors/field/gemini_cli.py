"""``gemini_cli``: Gemini CLI's tool-call loop check (``LoopDetectionService``), strike 1 nudge, strike 2 stop."""
from __future__ import annotations

from dataclasses import dataclass

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Message, Observation, ToolCall, Verdict
from ..signature import ordered_signature
from ._common import is_user_turn


@dataclass(frozen=True, slots=True)
class GeminiState:
    tail: tuple[str, ...] = ()  # the last ``max_cycle_length`` keys, newest last
    periods: tuple[int, ...] = ()  # periods[k-1]: length of the longest suffix with period k
    strikes: int = 0  # loops already detected within this prompt


def nudge_text(details: str) -> str:
    """The in-band strike-1 message; the quoted head and tail are Gemini's, the details ours."""
    return (f"System: Potential loop detected. Details: {details}. "
            "Please take a step back and confirm you are making progress; change your approach instead of repeating it.")


STOP_LINE = "Loop detected, stopping execution"


class GeminiCliDetector(Detector):
    """Repeated tool-call cycles of length 1..5, each repeated ``threshold`` (5) times back to back.

    **Identity**: tool name + ``JSON.stringify(args)`` — key-order *sensitive*, no
    normalisation, so the same arguments in another key order are a different call.
    **Pattern**: after each tool-call request (the call being checked is included), for
    cycle length k = 1..5, a loop is when the last k·5 keys are the last k keys repeated
    5 times: 5 identical calls, a 2-cycle after 10 calls, … a 5-cycle after 25
    (``threshold`` is Gemini's ``TOOL_CALL_LOOP_THRESHOLD``).
    Contiguous only. We keep, per k, the length L_k of the longest suffix with period k
    (updated in O(5) per call), which is equivalent and needs no window. The score is
    ``max_k floor(L_k / k)`` — repetitions of the best cycle — so the detector alarms
    iff ``score >= threshold``.

    **Tiers** (per prompt): strike 1 → ``nudge`` with the "System: Potential loop
    detected…" message (Gemini abandons the stream and sends a new turn with it); strike 2
    within the same prompt → ``stop`` ("Loop detected, stopping execution"). Detection is
    sticky, so repeating the looping call right after the nudge is strike 2. A user
    message starts a new prompt id and resets everything; tool results, thoughts and
    harness messages neither count nor reset.

    **Off switch**: ``disabled=True`` is Gemini's ``model.disableLoopDetection`` setting
    (default false, PR #18008) and the UI's "Disable loop detection for this session"
    (``disableForSession()``): no loop is ever reported. The scoreboard uses the
    default, detection on, as Gemini ships.

    **Left out**: the streamed-text "chanting" detector (our traces carry no streamed
    model text), and the LLM judge from turn 30 (it needs two model calls per check
    through Gemini's own ``loop-detection`` model aliases; the ``embedding`` detector is
    the semantic baseline here). ``MAX_TURNS = 100`` is a budget: see ``max_turns``.

    >>> det = GeminiCliDetector()
    >>> s = det.start()
    >>> verdicts = []
    >>> for i in range(6):
    ...     call = ToolCall("read_file", {"path": "a.py"})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("same"))
    ...     verdicts.append(d.verdict.value)
    >>> verdicts
    ['allow', 'allow', 'allow', 'allow', 'nudge', 'stop']
    """

    threshold_param = "threshold"

    def __init__(self, *, threshold: int = 5, max_cycle_length: int = 5, disabled: bool = False):
        self.threshold = threshold
        self.max_cycle_length = max_cycle_length
        self.disabled = disabled
        self._key = CallMemo(lambda call: ordered_signature(call.tool, call.args))

    def start(self) -> GeminiState:
        return GeminiState()

    def _periods(self, state: GeminiState, key: str) -> tuple[int, ...]:
        tail, n = state.tail, len(state.tail)
        out = []
        for k in range(1, self.max_cycle_length + 1):
            if n >= k and tail[-k] == key:
                out.append(state.periods[k - 1] + 1)
            else:  # the last min(k, n + 1) keys trivially have period k
                out.append(min(k, n + 1))
        return tuple(out)

    def check(self, state: GeminiState, call: ToolCall) -> Decision:
        if self.disabled:
            return Decision(Verdict.ALLOW, 0.0)
        periods = self._periods(state, self._key(call))
        reps, k = max(((length // k, k) for k, length in enumerate(periods, start=1)), key=lambda rk: (rk[0], -rk[1]))
        if reps < self.threshold:
            return Decision(Verdict.ALLOW, float(reps))
        if k == 1:
            details = f"{call.tool} was called {reps} times in a row with identical arguments"
        else:
            details = f"a cycle of {k} tool calls ending with {call.tool} repeated {reps} times"
        event = ("loop_detected", {"loop_type": "consecutive_identical_tool_calls", "cycle_length": k,
                                   "repetitions": reps, "strike": state.strikes + 1})
        if state.strikes == 0:
            return Decision(Verdict.NUDGE, float(reps), message=nudge_text(details), reason=details, events=(event,))
        return Decision(Verdict.STOP, float(reps), reason=f"second loop in this prompt: {details}",
                        events=(event,), stream=(STOP_LINE,))

    def record(self, state: GeminiState, call: ToolCall, decision: Decision, observation: Observation | None) -> GeminiState:
        # The request is in Gemini's history whether or not it ran: detection happens on the request.
        key = self._key(call)
        tail = (state.tail + (key,))[-self.max_cycle_length:]
        return GeminiState(tail, self._periods(state, key), state.strikes + (1 if decision.alarm else 0))

    def on_message(self, state: GeminiState, message: Message) -> GeminiState:
        return GeminiState() if is_user_turn(message) else state
