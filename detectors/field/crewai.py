"""``crewai``: CrewAI's repeated-usage check — the same call as the last successful one is not run."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Observation, ToolCall, Verdict
from ..signature import exact_signature

#: The observation CrewAI returns instead of running the tool, word for word.
REUSE_TEXT = "I tried reusing the same input, I must stop using this action input. I'll try something else instead."


@lru_cache(maxsize=1024)  # a run has a handful of tool names; the regexes would dominate the check otherwise
def sanitize_tool_name(name: str) -> str:
    """CrewAI compares tool names after its provider-safe normalisation: ASCII, camelCase
    split, lower case, quotes dropped, anything but ``a-z0-9_`` an underscore, runs of
    underscores collapsed ("Get Final Answer" and "getFinalAnswer" are "get_final_answer")."""
    name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    name = re.sub(r"['\"]", "", name)
    name = re.sub(r"[^a-z0-9_]", "_", name)
    return re.sub(r"_{2,}", "_", name).strip("_")


@dataclass(frozen=True, slots=True)
class CrewState:
    last_used: str | None = None  # signature of the last call that ran and succeeded
    refused: int = 0  # proposals of that same call refused since it last ran


class CrewAIDetector(Detector):
    """Refuse a call identical to the last *successfully used* one (2 in a row is the loop).

    **Identity**: sanitized tool name (``sanitize_tool_name``) + argument dict equality
    (key order does not matter).
    **Rule**: if the call equals ``ToolsHandler.last_used_tool`` — the last call that ran
    without error — it is not run and the observation is CrewAI's fixed sentence
    ("I tried reusing the same input, …"). So the 2nd consecutive identical call is the
    first one caught, an errored call never becomes "last used" (A ok, B failed, A is
    still refused), and refusals do not update it. In-band only, no escalation →
    ``nudge``. No parameters: the check is hard-coded in CrewAI.

    The score is 1 + the refusals of this same call since it last ran (0 when it differs
    from the last used call), so the detector alarms iff ``score >= 1``.

    **Mapping notes**: this check lives in CrewAI's text/ReAct tool-usage path; the
    native function-calling executor has no equivalent (it only consults the optional
    result cache). ``max_iter`` (25, then a forced final answer) is a budget: use
    ``max_turns`` with ``max_turns=25``. Per-tool ``max_usage_count`` is a usage quota,
    not loop detection, and is left out.

    >>> det = CrewAIDetector()
    >>> s = det.start()
    >>> call = ToolCall("search", {"q": "x"})
    >>> s = det.record(s, call, det.check(s, call), Observation("r"))
    >>> d = det.check(s, ToolCall("search", {"q": "x"}))
    >>> d.verdict.value, d.message == REUSE_TEXT
    ('nudge', True)
    """

    def __init__(self) -> None:
        self._key = CallMemo(lambda call: exact_signature(sanitize_tool_name(call.tool), call.args))

    def start(self) -> CrewState:
        return CrewState()

    def check(self, state: CrewState, call: ToolCall) -> Decision:
        if self._key(call) != state.last_used:
            return Decision(Verdict.ALLOW, 0.0)
        return Decision(Verdict.NUDGE, float(1 + state.refused), message=REUSE_TEXT,
                        reason=f"{call.tool} with the same input as the last tool used")

    def record(self, state: CrewState, call: ToolCall, decision: Decision, observation: Observation | None) -> CrewState:
        ran = observation is not None and not observation.nudge
        if ran and not observation.error:
            return CrewState(self._key(call), 0)
        if decision.alarm:
            return CrewState(state.last_used, state.refused + 1)
        return state
