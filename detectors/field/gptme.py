"""``gptme``: gptme's ``stuck_detect_hook`` — N identical tool-use turns, nudge, then stop after the escalations."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Hashable

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Message, Observation, ToolCall, Verdict
from ..signature import exact_signature

#: gptme recognises its own earlier nudges in the log by this phrase.
STUCK_MARKER = "appear stuck"


def nudge_text(tools: str, repeats: int) -> str:
    return (f"<system>You appear stuck: the same tool call (`{tools}`) was repeated {repeats} times without progress. "
            "Try a different approach, fix the underlying error, or stop if you are genuinely blocked.</system>")


@dataclass(frozen=True, slots=True)
class GptmeState:
    fingerprint: Hashable = None  # the fingerprint of the run of identical completed turns (None: no tool use)
    repeats: int = 0  # identical completed turns in that run
    escalations: int = 0  # nudges given during that run
    turn_id: Hashable = None  # the turn being assembled
    turn_calls: tuple = ()  # its calls' keys so far (the turn is complete when the next one starts)
    open_turn: bool = False  # a turn is being assembled
    spoke: bool = False  # an agent message arrived since the last call (a turn without tool use, if another follows)
    quiet_turn: Hashable = None  # a turn whose first call the harness answered instead of running: its other calls pass


class GptmeDetector(Detector):
    """gptme's stuck hook (``gptme/tools/complete.py``, ``stuck_detect_hook``).

    After every model turn (the ``LOOP_CONTINUE`` hook), the turn's **fingerprint** is the
    sorted multiset of its tool uses — tool, arguments, body — so the same calls in
    another order are the same turn. When the newest ``repeat_threshold`` (3) assistant
    turns with tool use have the same fingerprint, gptme injects a user message "You
    appear stuck: the same tool call (`save`) was repeated 3 times without progress…"
    → ``nudge``. Each nudge given during the run is an escalation; once
    ``escalate_max`` (2) were given and the turns still repeat, a non-interactive session
    ends (``SessionCompleteException``) → ``stop``; an ``interactive`` one stays quiet
    (the user can break the loop). A turn with a different fingerprint, or without tool
    use, ends the run; user messages do not (gptme reads the whole log), except that a
    real user message ends the escalation count. ``enabled`` is ``GPTME_STUCK_DETECT``,
    ``repeat_threshold`` ``GPTME_STUCK_REPEAT_THRESHOLD`` (< 2 disables),
    ``escalate_max`` ``GPTME_STUCK_ESCALATE_MAX``; the defaults are gptme's, and the
    scoreboard uses the autonomous (non-interactive) mode.

    **Mapping notes**: a turn is the calls sharing ``ToolCall.turn`` (a call without a
    turn id is a turn of its own); it is complete when the next turn starts. The hook
    runs between turns, so its verdict lands on the first call of the next turn — the
    call the model proposes right after the repeated turns — and calls inside a turn are
    not checked. Our arguments are a JSON object, so the fingerprint entry is the tool
    and its sorted-key arguments. A call our harness did not run (answered by a nudge) is
    not part of its turn, nor are the other calls of that turn: gptme's nudge comes
    before the model's next turn, and that turn was chosen before the model saw it. A user message that carries gptme's own marker
    ("appear stuck") counts as an escalation, as in gptme's log. Scores: repeats /
    threshold while the hook speaks (quiet interactive escalations score just below 1),
    so the detector alarms iff ``score >= 1``. The hook's root-cause hint (tool error,
    empty result, permission) only changes the nudge's wording and is left out.

    >>> det = GptmeDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(7):
    ...     call = ToolCall("save", {"path": "a.txt", "content": "hello"}, turn=i)
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("saved"))
    ...     out.append(d.verdict.value)
    >>> out
    ['allow', 'allow', 'allow', 'nudge', 'nudge', 'stop', 'stop']
    """

    def __init__(self, *, repeat_threshold: int = 3, escalate_max: int = 2, interactive: bool = False, enabled: bool = True):
        self.repeat_threshold = repeat_threshold
        self.escalate_max = escalate_max
        self.interactive = interactive
        self.enabled = enabled
        self._key = CallMemo(lambda call: (call.tool, exact_signature(call.tool, call.args)))

    def start(self) -> GptmeState:
        return GptmeState()

    @staticmethod
    def _continues_turn(state: GptmeState, call: ToolCall) -> bool:
        return state.open_turn and call.turn is not None and call.turn == state.turn_id and not state.spoke

    @staticmethod
    def _close_turn(state: GptmeState) -> GptmeState:
        """The state once the turn being assembled is complete."""
        if not state.open_turn:
            return state
        fp = tuple(sorted(state.turn_calls)) or None
        if fp is not None and fp == state.fingerprint:
            return replace(state, repeats=state.repeats + 1, open_turn=False, turn_calls=())
        return replace(state, fingerprint=fp, repeats=1 if fp is not None else 0, escalations=0,
                       open_turn=False, turn_calls=())

    @staticmethod
    def _in_quiet_turn(state: GptmeState, call: ToolCall) -> bool:
        return call.turn is not None and call.turn == state.quiet_turn

    def check(self, state: GptmeState, call: ToolCall) -> Decision:
        if (not self.enabled or self.repeat_threshold < 2 or self._continues_turn(state, call)
                or self._in_quiet_turn(state, call)):
            return Decision(Verdict.ALLOW, 0.0)
        done = self._close_turn(state)
        if done.fingerprint is None or done.repeats < self.repeat_threshold:
            return Decision(Verdict.ALLOW, done.repeats / self.repeat_threshold)
        score = done.repeats / self.repeat_threshold
        tools = "/".join(sorted({tool for tool, _ in done.fingerprint}))
        event = ("stuck_detect", {"repeats": done.repeats, "escalations": done.escalations})
        if done.escalations >= self.escalate_max:
            if self.interactive:
                return Decision(Verdict.ALLOW, (self.repeat_threshold - 1) / self.repeat_threshold)
            return Decision(Verdict.STOP, score, reason=f"Stuck loop not broken after {self.escalate_max} escalations",
                            events=(event,))
        return Decision(Verdict.NUDGE, score, message=nudge_text(tools, done.repeats),
                        reason=f"{done.repeats} identical tool-use turns", events=(event,))

    def record(self, state: GptmeState, call: ToolCall, decision: Decision, observation: Observation | None) -> GptmeState:
        ran = observation is not None and not observation.nudge
        if self._in_quiet_turn(state, call):
            return state
        continues = self._continues_turn(state, call)
        if not continues:
            state = self._close_turn(state)
        if decision.verdict is Verdict.NUDGE:
            state = replace(state, escalations=state.escalations + 1)
        if not ran:
            # The model proposed this turn before it saw the answer; the rest of it is not held against it.
            return replace(state, spoke=False, quiet_turn=call.turn)
        if continues:
            return replace(state, turn_calls=state.turn_calls + (self._key(call),))
        return replace(state, turn_id=call.turn, turn_calls=(self._key(call),), open_turn=True, spoke=False)

    def on_message(self, state: GptmeState, message: Message) -> GptmeState:
        if message.role == "user":
            state = self._close_turn(state)  # a user message comes between turns
            if STUCK_MARKER in message.content:
                return replace(state, escalations=state.escalations + 1)
            return replace(state, escalations=0)
        if message.role != "assistant":
            return state
        if state.spoke:
            # The previous agent text proposed no call: a turn without tool use ends the run.
            state = replace(self._close_turn(state), fingerprint=None, repeats=0, escalations=0)
        return replace(state, spoke=True)
