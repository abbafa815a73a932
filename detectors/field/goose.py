"""``goose``: goose's ``RepetitionInspector`` — REP-001 identical consecutive calls, REP-002 the same error."""
from __future__ import annotations

from dataclasses import dataclass

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Observation, ToolCall, Verdict, result_known
from ..signature import exact_signature
from ._common import EMPTY_RUN, Run, observation_text
from ..params import Range


@dataclass(frozen=True, slots=True)
class GooseState:
    run: Run = EMPTY_RUN  # REP-001: the last allowed call and its consecutive count
    error_tool: str | None = None  # REP-002: the tool whose results keep failing the same way
    error_text: str | None = None  # first ``error_prefix_chars`` of that error
    error_count: int = 0  # consecutive results with that (tool, error)


def deny_text(finding: str, tool: str, detail: str) -> str:
    """The refusal the model sees in place of the result (our wording; goose's is not quoted)."""
    return f"Tool call to {tool} denied by the repetition inspector ({finding}): {detail}. Try a different approach."


class GooseDetector(Detector):
    """Deny a call before it runs when REP-001 or REP-002 fires (the model sees the refusal).

    **REP-001**: consecutive identical calls; identity = tool name + structural JSON
    equality of the arguments (key order does not matter). With ``max_repetitions`` = n,
    the (n+1)-th identical call in a row is denied (strict ``>``); a denied call does not
    become the "last call", so further identical calls stay denied until the arguments
    change. goose's default is ``None`` (unlimited — maintainers call the inspector
    "effectively disabled"); the brief is to test the configured guard, so the default
    here is 5, the value of the ``--max-tool-repetitions 5`` example in the PR that added
    the flag (#2527; maintainers suggested 3–5 in #9136). Pass ``None`` for goose's own
    default. We implement the intended behaviour: the real counter advances on every
    call (goose's ``inspect()`` path checks a temporary clone, so there it never does).

    **REP-002** (PR #8994): when a tool's result is an error with the same first
    ``error_prefix_chars`` (100) characters ``max_same_errors`` (3, goose's
    ``MAX_CONSECUTIVE_ERROR_FINGERPRINTS``) times in a row, the next
    call to that tool is denied *whatever its arguments*; any successful result resets,
    and the counter resets at the first inspection that finds it at the limit (even one
    of another tool, which is not denied) so the model may try again.

    The score is ``max(run / max_repetitions, same_errors / max_same_errors)``, where
    ``run`` counts identical calls right before this one, so the detector alarms iff
    ``score >= 1``. Verdict ``prune`` (denied, not run, the model is told).

    >>> det = GooseDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(4):
    ...     call = ToolCall("http_get", {"url": f"https://api/x/{i}"})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("404 Not Found", error=True))
    ...     out.append(d.verdict.value)
    >>> out
    ['allow', 'allow', 'allow', 'prune']
    """

    param_ranges = {"max_repetitions": Range(1, none_ok=True), "max_same_errors": Range(1), "error_prefix_chars": Range(1)}

    def __init__(self, *, max_repetitions: int | None = 5, max_same_errors: int = 3, error_prefix_chars: int = 100):
        self.max_repetitions = max_repetitions
        self.max_same_errors = max_same_errors
        self.error_prefix_chars = error_prefix_chars
        self._key = CallMemo(lambda call: exact_signature(call.tool, call.args))

    def start(self) -> GooseState:
        return GooseState()

    def _rules(self, state: GooseState, call: ToolCall) -> tuple[int, int, bool, bool]:
        run = state.run.prior(self._key(call))
        errors = state.error_count if call.tool == state.error_tool else 0
        rep1 = self.max_repetitions is not None and run >= self.max_repetitions
        rep2 = errors >= self.max_same_errors
        return run, errors, rep1, rep2

    def check(self, state: GooseState, call: ToolCall) -> Decision:
        run, errors, rep1, rep2 = self._rules(state, call)
        score = errors / self.max_same_errors
        if self.max_repetitions is not None:
            score = max(score, run / self.max_repetitions if self.max_repetitions > 0 else float(run >= 0))
        if not (rep1 or rep2):
            return Decision(Verdict.ALLOW, score)
        if rep1:
            finding, detail = "REP-001", f"{run + 1} identical consecutive calls (max {self.max_repetitions})"
        else:
            finding, detail = "REP-002", f"the last {errors} results of {call.tool} were the same error"
        return Decision(Verdict.PRUNE, score, message=deny_text(finding, call.tool, detail), reason=f"{finding}: {detail}",
                        events=(("tool_inspection:deny", {"finding_id": finding, "tool": call.tool}),))

    def record(self, state: GooseState, call: ToolCall, decision: Decision, observation: Observation | None) -> GooseState:
        _, _, rep1, rep2 = self._rules(state, call)
        run = state.run if rep1 else state.run.extend(self._key(call))
        tool, text, count = state.error_tool, state.error_text, state.error_count
        if count >= self.max_same_errors:
            count = 0  # goose resets the count at any inspection that finds it at the limit, denied or not
        if observation is not None and not observation.nudge:
            if observation.error and not result_known(observation):
                pass  # an error whose text was not recorded is neither the same error nor another
            elif observation.error:
                prefix = observation_text(observation)[: self.error_prefix_chars]
                if count and tool == call.tool and text == prefix:
                    count += 1
                else:
                    tool, text, count = call.tool, prefix, 1
            else:
                tool, text, count = None, None, 0
        return GooseState(run, tool, text, count)
