"""``openhands_sdk``: the OpenHands SDK's ``StuckDetector`` — nudge at the 3rd identical failure, then STUCK."""
from __future__ import annotations

from ..protocol import Decision, Verdict
from ._openhands import Finding, History, OpenHandsBase


def nudge_text(tool: str, count: int, error: str) -> str:
    """The corrective environment message (the SDK's wording is not quoted; this names the same facts)."""
    return (f"You have called {tool} with the same arguments {count} times in a row and it failed each time "
            f"(last error: {error.strip()[:120]}). Repeating it will fail again: change your approach.")


class OpenHandsSDKDetector(OpenHandsBase):
    """V0's patterns with configurable thresholds, a 20-event window on the active branch, and a nudge.

    **Window**: the last ``max_events`` (20, ``MAX_EVENTS_TO_SCAN_FOR_STUCK_DETECTION``) events of the active branch — this path, so
    ``scope = "path"`` is the SDK's own rule — then only events after the last user
    message. Events are actions, observations and standalone agent messages; framework
    nudges do not reset the window. Nothing is checked below min(4, 3, 3) = 3 events.

    **Patterns** (``StuckDetectionThresholds``): ``action_observation`` (4) equal actions
    and observations; ``action_error`` (3): the trailing streak of the same action paired
    with error events (error texts not compared); ``monologue`` (3) consecutive agent
    messages with no action or observation between — *content is not compared*;
    ``alternating_pattern`` (6) actions and observations with x[i] = x[i+2].
    **Equality**: actions by tool, sorted-key arguments and thought (as V0);
    observations by full content and tool — the SDK has no shell special case.

    **Tiers**: an action-error streak of exactly ``action_error`` → ``nudge`` with a
    corrective message naming tool, repeat count and error; a longer streak (the 4th
    failure) or any other pattern → ``stop`` (``execution_status = STUCK``).

    **Mapping notes**: in the SDK the nudge is injected before the next step; here it
    answers the next proposed call, which the model chose before it saw the nudge, so
    that call is not held against it: it leaves no event, as the SDK's environment
    message leaves no action. The nudge is given once per streak (the SDK remembers the
    error it nudged for); after it the streak's threshold is one failure more, so a model
    that repeats the failing call runs it once more and is STUCK on the next step, and a
    model that changes course is never stopped on the old streak. In open loop this is
    exactly the SDK's sequence: nudge after 3 failures, STUCK after the 4th. The score is
    the largest ratio of a pattern's length to its threshold (the action-error ratio is
    taken against 4 once nudged), so the detector alarms iff ``score >= 1``. The
    context-window pattern is a stub in the SDK and is left out here too.

    >>> from detectors.protocol import Observation, ToolCall
    >>> det = OpenHandsSDKDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(5):
    ...     call = ToolCall("http_get", {"url": "https://x"})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation(f"timeout after {i}s", error=True))
    ...     out.append(d.verdict.value)
    >>> out
    ['allow', 'allow', 'allow', 'nudge', 'stop']
    """

    _monologue_by_content = False
    _actions_break_monologue = True
    _nudge_tier = True

    def __init__(self, *, action_observation: int = 4, action_error: int = 3, monologue: int = 3,
                 alternating_pattern: int = 6, max_events: int | None = 20, compare_thought: bool = True):
        for name, value in (("action_observation", action_observation), ("action_error", action_error),
                            ("monologue", monologue), ("alternating_pattern", alternating_pattern)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        self.action_observation = action_observation
        self.action_error = action_error
        self.monologue = monologue
        self.alternating_pattern = alternating_pattern
        self.max_events = max_events
        self.compare_thought = compare_thought
        self._setup()

    def decide(self, state: History, finding: Finding) -> Decision:
        event = self.stuck_event(finding)
        if finding.nudge_due and finding.ratio_other < 1.0:
            last_action, last_outcome = state.actions[-1], state.outcomes[-1]
            return Decision(Verdict.NUDGE, finding.score,
                            message=nudge_text(last_action.tool, finding.repeats, last_outcome.text),
                            reason=f"{finding.repeats} identical failing calls (nudge before STUCK)", events=(event,))
        return Decision(Verdict.STOP, finding.score, reason=f"stuck: {finding.loop_type}", events=(event,))
