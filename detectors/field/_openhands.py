"""The event history both OpenHands stuck detectors read, and the patterns they look for.

OpenHands checks *before each agent step* from the history alone: the actions and
observations so far and the agent's standalone messages. In our protocol that check
lands on the next proposed call, and the call's own arguments play no part.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Hashable, NamedTuple

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Message, Observation, ToolCall, Verdict, result_known
from ..signature import exact_signature
from ._common import observation_key, observation_text


class Action(NamedTuple):
    seq: int  # position among the window's events
    key: Hashable
    tool: str


class Outcome(NamedTuple):
    seq: int
    key: Hashable
    error: bool
    text: str  # the start of the error text, for the corrective nudge ("" when not an error)
    syntax: frozenset = frozenset()  # IPython syntax-error fingerprints (V0 only), see ``syntax_tokens``


#: The IPython syntax errors V0 treats like error observations when three in a row agree.
UNTERMINATED = "SyntaxError: unterminated string literal (detected at line"
LINE_ERRORS = ("SyntaxError: invalid syntax. Perhaps you forgot a comma?", "SyntaxError: incomplete input")


def syntax_tokens(content: str) -> frozenset:
    """What V0 compares across the last three IPython outputs of a repeated cell.

    An output counts only if it ends with the kernel's two footer lines
    ("[Jupyter current working directory:", "[Jupyter Python interpreter:") and the line
    above them carries the error. Unterminated strings agree when that error line is the
    same; the invalid-syntax / incomplete-input errors also need at least 6 lines and the
    same first line "Cell In[1], line N".
    """
    lines = content.strip().split("\n")
    if len(lines) < 3 or not (lines[-2].startswith("[Jupyter current working directory:")
                              and lines[-1].startswith("[Jupyter Python interpreter:")):
        return frozenset()
    error_line = lines[-3]
    tokens = set()
    if UNTERMINATED in error_line:
        tokens.add(("unterminated", error_line))
    first = lines[0].strip()
    if len(lines) >= 6 and first.startswith("Cell In[1], line"):
        tokens.update((msg, first, error_line) for msg in LINE_ERRORS if msg in error_line)
    return frozenset(tokens)


@dataclass(frozen=True, slots=True)
class History:
    actions: tuple[Action, ...] = ()  # newest last, bounded
    outcomes: tuple[Outcome, ...] = ()
    messages: tuple[str, ...] = ()  # standalone agent messages since the last breaking event
    seq: int = 0  # events since the window (re)started
    calls: int = 0  # calls on the path, never reset: loop_start_idx is a path call index
    thought: str | None = None  # the latest agent text: the thought of the calls of its turn
    thought_used: bool = True  # False while that text has proposed no call yet
    nudged_seq: int | None = None  # first event of the action-error streak already nudged for


class Finding(NamedTuple):
    score: float  # the largest pattern ratio: 1.0 is where a pattern trips
    loop_type: str
    repeats: int
    start: int | None  # path call index of the oldest action in the matched window
    ratio_other: float  # the largest ratio of the patterns other than action-error
    nudge_due: bool  # the action-error streak just reached its threshold and was not nudged yet
    streak_seq: int | None  # first event of the current action-error streak


def _trailing(items, same) -> int:
    """Length of the trailing run of ``items`` for which ``same(item, last)`` holds."""
    if not items:
        return 0
    last, n = items[-1], 0
    for item in reversed(items):
        if not same(item, last):
            break
        n += 1
    return n


def _alternating(keys: list) -> int:
    """Length of the trailing stretch where every key equals the one two before it."""
    n = len(keys)
    if n < 3:
        return n
    length = 2
    for i in range(n - 3, -1, -1):
        if keys[i] != keys[i + 2]:
            break
        length += 1
    return length


class OpenHandsBase(Detector):
    """Shared machinery; subclasses set the thresholds, window and equality details.

    Subclass attributes read here: ``action_observation``, ``action_error``,
    ``monologue``, ``alternating_pattern`` (thresholds), ``max_events`` (window, or None),
    ``compare_thought``, ``_shell_tools`` (observations compared by error flag only),
    ``_ipython_tools`` (V0's edit-cell and syntax-error rules),
    ``_user_resets`` (a user message restarts the window), ``_monologue_by_content``,
    ``_actions_break_monologue`` and ``_nudge_tier`` (an action-error streak of exactly
    ``action_error`` nudges once; STUCK needs one more failure).

    A call that did not run (pruned, or answered by a guard's nudge) is not an event:
    OpenHands drops null observations, and the SDK's nudge is an environment message
    that does not take the place of an action. A call that ran without a recorded result
    is an action with an observation equal to no other (only its error flag is known), so
    the patterns that compare observations never fire on unknown results.
    """

    # Known conformance failures (detectors.testing), declared as data with the reason.
    expected_failures = {"check_catches_unrecorded_repeat": "faithful to OpenHands: a repeat is stuck only when its "
                                                            "observations repeat too, and unrecorded ones are unknown"}
    _shell_tools: frozenset[str] = frozenset()
    _ipython_tools: frozenset[str] = frozenset()
    _nudge_tier = False
    _user_resets = True
    _monologue_by_content = True
    _actions_break_monologue = False

    def _setup(self) -> None:
        self._sig = CallMemo(lambda call: exact_signature(call.tool, call.args))
        self._keep = max(self.action_observation, self.action_error + 1, self.alternating_pattern, self.monologue)
        self._min_events = min(self.action_observation, self.action_error, self.monologue)

    def start(self) -> History:
        return History()

    # -- the analysis ----------------------------------------------------------------
    def analyse(self, state: History) -> Finding | None:
        if self.max_events is None:
            acts, outs, window = list(state.actions), list(state.outcomes), state.seq
        else:
            lo = state.seq - self.max_events
            acts = [a for a in state.actions if a.seq >= lo]
            outs = [o for o in state.outcomes if o.seq >= lo]
            window = min(state.seq, self.max_events)
        if window < self._min_events:
            return None
        run_a = _trailing(acts, lambda a, b: a.key == b.key)
        run_o = _trailing(outs, lambda a, b: a.key == b.key)
        run_err = _trailing(outs, lambda a, b: a.error) if outs and outs[-1].error else 0
        if outs and outs[-1].syntax:
            run_err = max(run_err, max(_trailing(outs, lambda a, b, t=t: t in a.syntax) for t in outs[-1].syntax))
        alt = min(_alternating([a.key for a in acts]), _alternating([o.key for o in outs]))
        if self._monologue_by_content:
            mono = _trailing(state.messages, lambda a, b: a == b)
        else:
            mono = len(state.messages)
        pairs = min(run_a, run_o)
        streak = min(run_a, run_err)
        streak_seq = acts[-streak].seq if streak else None
        nudged = self._nudge_tier and streak > 0 and state.nudged_seq == streak_seq
        # Once the nudge for this streak was given, what remains is STUCK at one failure more.
        error_threshold = self.action_error + 1 if nudged else self.action_error
        candidates = [
            (pairs / self.action_observation, "repeating_action_observation", pairs, pairs),
            (streak / error_threshold, "repeating_action_error", streak, streak),
            (alt / self.alternating_pattern, "repeating_action_observation_pattern", alt // 2, alt),
            (mono / self.monologue, "monologue", mono, 0),
        ]
        score, loop_type, repeats, span = max(candidates, key=lambda c: c[0])
        start = state.calls - span if span else None
        other = max(c[0] for c in candidates if c[1] != "repeating_action_error")
        nudge_due = self._nudge_tier and not nudged and streak == self.action_error
        return Finding(score, loop_type, repeats, start, other, nudge_due, streak_seq)

    def decide(self, state: History, finding: Finding) -> Decision:
        raise NotImplementedError

    def check(self, state: History, call: ToolCall) -> Decision:
        finding = self.analyse(state)
        if finding is None:
            return Decision(Verdict.ALLOW, 0.0)
        if finding.score < 1.0:
            return Decision(Verdict.ALLOW, finding.score)
        return self.decide(state, finding)

    @staticmethod
    def stuck_event(finding: Finding) -> tuple[str, dict]:
        return ("stuck:detected", {"loop_type": finding.loop_type, "loop_repeat_times": finding.repeats,
                                   "loop_start_idx": finding.start})

    # -- the history -----------------------------------------------------------------
    def _action_key(self, state: History, call: ToolCall) -> Hashable:
        if call.tool in self._ipython_tools and isinstance(call.args, dict):
            code = call.args.get("code")
            if isinstance(code, str) and "edit_file_by_replace(" in code:
                # V0 compares edit cells by their first three code lines, thought ignored;
                # a cell of two lines or fewer equals nothing, not even itself.
                lines = code.split("\n")
                return ("edit_cell", tuple(lines[:3])) if len(lines) > 2 else ("edit_cell", state.seq)
        sig = self._sig(call)
        return (sig, state.thought) if self.compare_thought else sig

    def _outcome(self, seq: int, call: ToolCall, observation: Observation) -> Outcome:
        error = bool(observation.error)
        if call.tool in self._shell_tools:
            key: Hashable = ("exit", error)  # command output ignored: command + exit code only
        elif not result_known(observation):
            # Ran without a recorded result: equal to no other outcome, so no observation
            # pattern is built on it; its error flag still counts for the error streak.
            key = ("unrecorded", seq)
        else:
            key = observation_key(observation)
        text = observation_text(observation) if result_known(observation) else ""
        syntax = syntax_tokens(text) if call.tool in self._ipython_tools and not error else frozenset()
        return Outcome(seq, key, error, text[:200] if error else "", syntax)

    def record(self, state: History, call: ToolCall, decision: Decision, observation: Observation | None) -> History:
        nudged_seq = state.nudged_seq
        if decision.verdict is Verdict.NUDGE:
            finding = self.analyse(state)
            nudged_seq = finding.streak_seq if finding is not None else None
        if observation is None or observation.nudge:
            return replace(state, calls=state.calls + 1, thought_used=True, nudged_seq=nudged_seq)
        keep = self._keep
        seq = state.seq
        actions = (state.actions + (Action(seq, self._action_key(state, call), call.tool),))[-keep:]
        outcomes = (state.outcomes + (self._outcome(seq + 1, call, observation),))[-keep:]
        return History(actions, outcomes, (), seq + 2, state.calls + 1, state.thought, True, nudged_seq)

    def on_message(self, state: History, message: Message) -> History:
        if message.role == "user":
            return History(calls=state.calls) if self._user_resets else state
        if message.role != "assistant":
            return state  # harness and environment messages are transparent
        messages, seq = state.messages, state.seq
        if state.thought is not None and not state.thought_used:
            # The previous agent text proposed no call: it was a message of its own.
            messages = (messages + (state.thought,))[-self._keep:]
            seq += 1
        return replace(state, messages=messages, seq=seq, thought=message.content, thought_used=False)
