"""``openclaw``: OpenClaw's result-aware ``detectToolCallLoop`` — warnings at 10, blocks at 20."""
from __future__ import annotations

from typing import Hashable, NamedTuple, Sequence

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Observation, ToolCall, Verdict
from ..signature import exact_signature
from ._common import observation_key
from ..params import Range


class CallRecord(NamedTuple):
    tool: str
    args: str  # tool name + stable hash of the arguments
    result: Hashable | None  # hash of the outcome; None when the call did not run (a veto)


def _outcome_streak(results: list) -> int:
    """How many of the newest known outcomes (newest first) equal the newest one."""
    known = [r for r in results if r is not None]  # a veto leaves no hash, so a block stays sticky
    if not known:
        return 0
    first, n = known[0], 0
    for r in known:
        if r != first:
            break
        n += 1
    return n


class OpenClawDetector(Detector):
    """Several result-aware rules over the last ``history_size`` (30) calls of the path.

    **Identity**: tool name + hash of the arguments' stable (sorted-key) JSON; after a
    call runs, its record also gets a **result hash** (error flag + content). Checked
    before each call, using the earlier calls' outcomes and this call's arguments:

    * **generic repeat** — this call appears ≥ ``warning_threshold`` (10) times in the
      window, counting itself, anywhere (not necessarily consecutive) → warning; its
      same-arguments **outcome streak** (the newest outcomes of this call, all identical)
      reaching ``critical_threshold`` (20) → critical;
    * **known-poll no-progress** — for ``poll_tools`` the occurrence count is replaced by
      the outcome streak: warning at 10, critical at 20 (a poll whose answer changes is
      progress and is never flagged);
    * **ping-pong** — the trailing A,B,A,B alternation, this call included, reaching
      10 → warning; reaching 20 with both sides' outcomes stable → critical;
    * **global no-progress breaker** — an outcome streak of ``global_circuit_breaker``
      (30) → critical (it only matters when ``critical_threshold`` is raised above it);
    * **unknown tool** — with ``known_tools`` given, the ``unknown_tool_threshold``-th
      (10) call to the same missing tool, whatever its arguments → critical.

    **Tiers**: a warning is an injected message → ``nudge``; critical blocks the call →
    ``prune``. The score is the largest ratio of a rule's count to the count where that
    rule first alarms, so the detector alarms iff ``score >= 1``.

    **Defaults and mapping**: OpenClaw ships with the detector disabled; we test the
    configured behaviour with its documented thresholds. History is scoped per run id,
    i.e. per path here. OpenClaw normalises results per tool (exec: status, exit code and
    output only; known poll tools: status, exit and output; message-send tools: ids and
    timestamps stripped); our tools have no such fields, so the result hash is the whole
    result — ``poll_tools`` names which of our tools play the poll role (default
    ``check_status``). The newer "argument churn" variant of the breaker and the
    ``update_plan`` normalisation are left out. OpenClaw's message texts are not quoted
    in PEERS.md; the warnings here are our wording. Warnings repeat on every call past
    the threshold.

    >>> det = OpenClawDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(21):
    ...     call = ToolCall("search", {"q": "x"}) if i % 2 else ToolCall("calc", {"e": str(i)})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("same"))
    ...     out.append(d.verdict.value)
    >>> out.index("nudge")  # the 10th search (call 19): scattered, not consecutive
    19
    """

    # Known conformance failures (detectors.testing), declared as data with the reason.
    expected_failures = {"check_catches_exact_repeat": "faithful to OpenClaw: the first warning comes at the "
                                                       "10th repeat (warning_threshold), beyond the window of 5"}

    param_ranges = {"history_size": Range(1), "warning_threshold": Range(1), "critical_threshold": Range(1),
                    "global_circuit_breaker": Range(1), "unknown_tool_threshold": Range(1)}

    def __init__(
        self,
        *,
        history_size: int = 30,
        warning_threshold: int = 10,
        critical_threshold: int = 20,
        global_circuit_breaker: int = 30,
        unknown_tool_threshold: int = 10,
        poll_tools: Sequence[str] = ("check_status",),
        known_tools: Sequence[str] | None = None,
    ):
        self.history_size = history_size
        self.warning_threshold = warning_threshold
        self.critical_threshold = critical_threshold
        self.global_circuit_breaker = global_circuit_breaker
        self.unknown_tool_threshold = unknown_tool_threshold
        self.poll_tools = tuple(poll_tools)
        self.known_tools = None if known_tools is None else tuple(known_tools)
        self._poll = frozenset(self.poll_tools)
        self._known = None if known_tools is None else frozenset(known_tools)
        self._key = CallMemo(lambda call: exact_signature(call.tool, call.args))

    def start(self) -> tuple[CallRecord, ...]:
        return ()

    def _ping_pong(self, history: tuple[CallRecord, ...], key: str) -> tuple[int, bool]:
        """Trailing A,B,A,B length (this call included) and whether both sides' outcomes are stable."""
        keys = [r.args for r in history] + [key]
        n = len(keys)
        if n < 2 or keys[-1] == keys[-2]:
            return 1, False
        length = 2
        for i in range(n - 3, -1, -1):
            if keys[i] != keys[i + 2] or keys[i] == keys[i + 1]:
                break
            length += 1
        past = history[n - length:]  # the stretch without the current call
        sides = ({r.result for r in past[-1::-2] if r.result is not None},
                 {r.result for r in past[-2::-2] if r.result is not None})
        return length, all(len(s) <= 1 for s in sides)

    def check(self, state: tuple[CallRecord, ...], call: ToolCall) -> Decision:
        key = self._key(call)
        same = [r.result for r in reversed(state) if r.args == key]  # newest first
        occurrences = len(same) + 1
        streak = _outcome_streak(same)
        alternation, stable = self._ping_pong(state, key)
        poll = call.tool in self._poll
        warn, crit = self.warning_threshold, self.critical_threshold
        rules = [  # (ratio, critical?, name, count)
            ((streak if poll else occurrences) / warn, False, "known_poll_no_progress" if poll else "generic_repeat",
             streak if poll else occurrences),
            (streak / crit, True, "known_poll_no_progress" if poll else "generic_repeat", streak),
            (streak / self.global_circuit_breaker, True, "global_circuit_breaker", streak),
            (alternation / warn, False, "ping_pong", alternation),
        ]
        if stable:
            rules.append((alternation / crit, True, "ping_pong", alternation))
        if self._known is not None and call.tool not in self._known:
            unknown = 1 + sum(1 for r in state if r.tool == call.tool)
            rules.append((unknown / self.unknown_tool_threshold, True, "unknown_tool_repeat", unknown))
        score = max(r[0] for r in rules)
        if score < 1.0:
            return Decision(Verdict.ALLOW, score)
        critical = [r for r in rules if r[1] and r[0] >= 1.0]
        _, _, name, count = max(critical or rules, key=lambda r: r[0])
        level = "critical" if critical else "warning"
        event = ("tool_loop", {"detector": name, "level": level, "count": count})
        if name == "ping_pong":
            what = f"you have alternated between the same two calls for {count} calls"
        elif name == "unknown_tool_repeat":
            what = f"{call.tool} is not an available tool and was called {count} times"
        else:
            what = f"{call.tool} was called with these arguments {count} times recently ({name})"
        if critical:
            return Decision(Verdict.PRUNE, score, message=f"Blocked: {what} without progress. This call was not run; do something different.",
                            reason=f"critical {name}: {count}", events=(event,))
        return Decision(Verdict.NUDGE, score, message=f"Warning: {what}. If it is not making progress, stop repeating it and change approach.",
                        reason=f"warning {name}: {count}", events=(event,))

    def record(self, state: tuple[CallRecord, ...], call: ToolCall, decision: Decision, observation: Observation | None) -> tuple[CallRecord, ...]:
        ran = observation is not None and not observation.nudge
        rec = CallRecord(call.tool, self._key(call), observation_key(observation) if ran else None)
        return (state + (rec,))[-self.history_size:]
