"""``openclaw``: OpenClaw's result-aware ``detectToolCallLoop`` — warnings at 10, blocks at 20."""
from __future__ import annotations

import re
from typing import Any, Hashable, Mapping, NamedTuple, Sequence

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Message, Observation, ToolCall, Verdict, result_known
from ..signature import exact_signature, stable_hash
from ._common import is_user_turn, observation_text
from ..params import Range

#: How OpenClaw reads the missing tool's name out of an error ("Unknown tool: x", "Tool x not found").
UNKNOWN_TOOL_PATTERNS = (re.compile(r"unknown tool[:\s]+[\"']?([a-z0-9_.-]+)[\"']?", re.I),
                         re.compile(r"tool\s+[\"']?([a-z0-9_.-]+)[\"']?\s+(?:not found|is not available)", re.I))


class CallRecord(NamedTuple):
    tool: str
    args: str  # tool name + stable hash of the arguments
    result: Hashable | None  # hash of the outcome; None when the call did not run (our own veto)
    unknown: str | None  # the missing tool named by the call's error, if any


def unknown_tool_name(text: str) -> str | None:
    for pattern in UNKNOWN_TOOL_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1).lower()
    return None


def _text_of(result: Mapping[str, Any]) -> str:
    parts = result.get("content")
    if not isinstance(parts, list):
        return ""
    texts = [p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
    return "\n".join(texts).strip()


def _exec_hash(details: Mapping[str, Any], text: str) -> Hashable | None:
    status = details.get("status")
    if not isinstance(status, str):
        return None
    if status == "running":
        return stable_hash({"status": status, "tail": details.get("tail") if isinstance(details.get("tail"), str) else ""})
    if status in ("completed", "failed"):
        exit_code = details.get("exitCode")
        output = details.get("aggregated")
        return stable_hash({"status": status, "exitCode": exit_code if isinstance(exit_code, (int, float)) else None,
                            "timedOut": details.get("timedOut") is True,
                            "output": output if isinstance(output, str) and output else text})
    return None


class OpenClawDetector(Detector):
    """OpenClaw's rules over the last ``history_size`` (30) calls of the run, in its order.

    **Identity**: tool name + hash of the arguments' stable (sorted-key) JSON; after a
    call runs, its record also gets a **result hash**. Checked before each call from the
    earlier calls' records and this call's arguments; the first rule that fires wins:

    1. **unknown tool** — the trailing records of this tool whose errors name the same
       missing tool ("Unknown tool: x", "Tool x not found") number ≥
       ``unknown_tool_threshold`` (10) → critical, whatever the arguments;
    2. **global no-progress breaker** — the no-progress streak (the newest known outcomes
       of this same call, all identical) ≥ ``global_circuit_breaker`` (30) → critical;
    3. **known-poll no-progress** (``poll_tools``) — the streak ≥ ``critical_threshold``
       (20) → critical, ≥ ``warning_threshold`` (10) → warning;
    4. **ping-pong** — the history ends in an A,B,A,B alternation and this call continues
       it: its length with this call ≥ 20 with both sides' outcomes stable → critical,
       ≥ 10 → warning;
    5. **generic repeat** (not poll tools) — the streak ≥ 20 → critical; this call
       appearing ≥ ``warning_threshold`` times in the history (anywhere, not necessarily
       consecutive; the call itself not counted) → warning.

    **Tiers**: a warning is an injected message → ``nudge``; critical blocks the call →
    ``prune``. The score is the largest ratio of a rule's count to the count where that
    rule first fires, so the detector alarms iff ``score >= 1``.

    **Results**: OpenClaw hashes results of its own shape (``{"content": [{"text"}],
    "details": {…}}``) per tool — ``exec_tools`` by status, exit code, timeout and output
    (a running command by its tail only, so pids, session ids, durations and cwd never
    count as progress); poll tools by status, exit and output; anything else by details +
    text — and errors by their text. A result not of that shape (our simulator's tools)
    is hashed whole. Our own veto leaves no hash, so a block stays sticky. The
    per-channel stripping of volatile ids from message sends and the newer
    "argument churn" variant of the breaker are left out.

    **Scope and defaults**: history is per run; a user message starts a new run (OpenClaw
    scopes by run id). ``enabled`` is OpenClaw's ``loopDetection.enabled``: OpenClaw ships
    it **off**; the scoreboard uses ``enabled=True`` because a disabled guard allows
    everything and there is nothing to compare — the numbers describe OpenClaw as its
    users configure it when they opt in. The other parameters are OpenClaw's
    ``historySize``, ``warningThreshold``, ``criticalThreshold``,
    ``globalCircuitBreakerThreshold`` and ``unknownToolThreshold``; ``poll_tools`` stands
    for its known-poll rule (``command_status``, ``process`` poll/log), ``exec_tools`` for
    its ``exec`` tool. ``known_tools`` (optional) additionally treats a
    call to a tool outside the list as a call to a missing tool. OpenClaw's message texts
    are paraphrased, not quoted.

    >>> det = OpenClawDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(23):
    ...     call = ToolCall("search", {"q": "x"}) if i % 2 else ToolCall("calc", {"e": str(i)})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("same"))
    ...     out.append(d.verdict.value)
    >>> out.index("nudge")  # the 11th search: 10 earlier ones in the history, scattered
    21
    """

    # Known conformance failures (detectors.testing), declared as data with the reason.
    expected_failures = {"check_catches_exact_repeat": "faithful to OpenClaw: the first warning comes after "
                                                       "10 identical calls (warning_threshold), beyond the window of 5"}

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
        exec_tools: Sequence[str] = ("exec",),
        known_tools: Sequence[str] | None = None,
        enabled: bool = True,
    ):
        self.history_size = history_size
        self.warning_threshold = warning_threshold
        self.critical_threshold = critical_threshold
        self.global_circuit_breaker = global_circuit_breaker
        self.unknown_tool_threshold = unknown_tool_threshold
        self.poll_tools = tuple(poll_tools)
        self.exec_tools = tuple(exec_tools)
        self.known_tools = None if known_tools is None else tuple(known_tools)
        self.enabled = enabled
        self._poll = frozenset(self.poll_tools)
        self._exec = frozenset(self.exec_tools)
        self._known = None if known_tools is None else frozenset(known_tools)
        self._key = CallMemo(lambda call: exact_signature(call.tool, call.args))

    def start(self) -> tuple[CallRecord, ...]:
        return ()

    # -- the streaks -------------------------------------------------------------------
    @staticmethod
    def _unknown_streak(history: tuple[CallRecord, ...], tool: str) -> int:
        name, n = None, 0
        for rec in reversed(history):
            if rec.tool != tool or rec.unknown is None or (name is not None and rec.unknown != name):
                break
            name, n = rec.unknown, n + 1
        return n

    @staticmethod
    def _no_progress_streak(history: tuple[CallRecord, ...], key: str) -> int:
        latest, n = None, 0
        for rec in reversed(history):
            if rec.args != key or rec.result is None:
                continue
            if latest is None:
                latest = rec.result
            elif rec.result != latest:
                break
            n += 1
        return n

    @staticmethod
    def _ping_pong(history: tuple[CallRecord, ...], key: str) -> tuple[int, bool]:
        """Length of the alternation this call would continue (0 if none) and whether both
        sides' outcomes in it are stable."""
        if not history:
            return 0, False
        last = history[-1].args
        other = next((r.args for r in reversed(history[:-1]) if r.args != last), None)
        if other is None or key != other:
            return 0, False
        tail = 0
        for rec in reversed(history):
            if rec.args != (last if tail % 2 == 0 else other):
                break
            tail += 1
        if tail < 2:
            return 0, False
        firsts: dict[str, Hashable] = {}
        stable = True
        for rec in history[len(history) - tail:]:
            if rec.result is None or firsts.setdefault(rec.args, rec.result) != rec.result:
                stable = False
                break
        return tail + 1, stable and len(firsts) == 2

    # -- the protocol ------------------------------------------------------------------
    def check(self, state: tuple[CallRecord, ...], call: ToolCall) -> Decision:
        if not self.enabled:
            return Decision(Verdict.ALLOW, 0.0)
        key = self._key(call)
        poll = call.tool in self._poll
        unknown = self._unknown_streak(state, call.tool)
        streak = self._no_progress_streak(state, key)
        alternation, stable = self._ping_pong(state, key)
        recent = sum(1 for r in state if r.args == key)
        warn, crit = self.warning_threshold, self.critical_threshold
        rules = [  # (ratio, critical?, name, count), in OpenClaw's order
            (unknown / self.unknown_tool_threshold, True, "unknown_tool_repeat", unknown),
            (streak / self.global_circuit_breaker, True, "global_circuit_breaker", streak),
        ]
        if poll:
            rules += [(streak / crit, True, "known_poll_no_progress", streak),
                      (streak / warn, False, "known_poll_no_progress", streak)]
        if stable:
            rules.append((alternation / crit, True, "ping_pong", alternation))
        rules.append((alternation / warn, False, "ping_pong", alternation))
        if not poll:
            rules += [(streak / crit, True, "generic_repeat", streak),
                      (recent / warn, False, "generic_repeat", recent)]
        score = max(r[0] for r in rules)
        fired = next((r for r in rules if r[0] >= 1.0), None)
        if fired is None:
            return Decision(Verdict.ALLOW, score)
        _, critical, name, count = fired
        level = "critical" if critical else "warning"
        event = ("tool_loop", {"detector": name, "level": level, "count": count})
        if name == "ping_pong":
            what = f"you have alternated between the same two calls for {count} calls"
        elif name == "unknown_tool_repeat":
            what = f"{call.tool} is not an available tool and was attempted {count} times"
        else:
            what = f"{call.tool} was called with these arguments {count} times recently ({name})"
        if critical:
            return Decision(Verdict.PRUNE, score, message=f"Blocked: {what} without progress. This call was not run; do something different.",
                            reason=f"critical {name}: {count}", events=(event,))
        return Decision(Verdict.NUDGE, score, message=f"Warning: {what}. If it is not making progress, stop repeating it and change approach.",
                        reason=f"warning {name}: {count}", events=(event,))

    def _outcome(self, call: ToolCall, observation: Observation) -> tuple[Hashable, str | None]:
        if observation.error:
            text = observation_text(observation)
            return ("error", stable_hash(text)), unknown_tool_name(text)
        content = observation.content
        if isinstance(content, Mapping) and ("details" in content or isinstance(content.get("content"), list)):
            details = content.get("details") if isinstance(content.get("details"), Mapping) else {}
            text = _text_of(content)
            if call.tool in self._exec:
                hashed = _exec_hash(details, text)
                if hashed is not None:
                    return hashed, None
            if call.tool in self._poll:
                return stable_hash({k: details.get(k) for k in ("status", "exitCode", "exitSignal", "aggregated")} | {"text": text}), None
            return stable_hash({"details": details, "text": text}), None
        return stable_hash(content), None

    def record(self, state: tuple[CallRecord, ...], call: ToolCall, decision: Decision, observation: Observation | None) -> tuple[CallRecord, ...]:
        # A call that ran without a recorded result has no outcome to compare, like our own veto.
        result, unknown = self._outcome(call, observation) if result_known(observation) else (None, None)
        if unknown is None and self._known is not None and call.tool not in self._known:
            unknown = call.tool.lower()
        rec = CallRecord(call.tool, self._key(call), result, unknown)
        return (state + (rec,))[-self.history_size:]

    def on_message(self, state: tuple[CallRecord, ...], message: Message) -> tuple[CallRecord, ...]:
        return () if is_user_turn(message) else state
