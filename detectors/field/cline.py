"""``cline``: Cline's consecutive identical-call tracker — soft warning at 3, user decides at 5."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Message, Observation, ToolCall, Verdict
from ..signature import exact_signature
from ._common import EMPTY_RUN, Run, is_user_turn


def soft_text(tool: str, count: int) -> str:
    """The soft warning; the opening sentence is Cline's, the advice after it ours."""
    return (f"Tool [{tool}] has been called {count} times consecutively with identical arguments. "
            "Repeating it will not give a different result; try a different approach.")


def hard_text(tool: str, count: int) -> str:
    return f"Cline is stuck: tool [{tool}] was called {count} times consecutively with identical arguments. Try a different approach, or stop this run?"


class ClineDetector(Detector):
    """Warn once at ``soft_threshold`` identical consecutive calls, hand over at ``hard_threshold``.

    **Identity**: tool name + JSON of the arguments with keys sorted recursively, minus
    the top-level ``ignored_params`` (the classic extension drops ``task_progress``, a
    checklist that changes on every call; the SDK drops nothing — pass ``()``).
    **Rule**: consecutive count, the first call counting 1; a different call restarts it,
    and so does a new run: a user message (the SDK resets the tracker when ``run()``
    starts a fresh conversation; the classic extension clears it when the user answers
    "continue"). Defaults are the CLI's ``{softThreshold: 3, hardThreshold: 5}``.
    ``enabled=False`` is the SDK's ``execution.loopDetection = false`` (Cline core is off
    unless the CLI turns it on; the scoreboard uses the CLI's configuration, on).

    **Tiers**: count == soft → ``nudge`` (classic: "Tool [X] has been called 3 times
    consecutively with identical arguments…", appended to the next user message; SDK:
    ``softWarning`` is ``count === softThreshold``), so the repeats between soft and hard
    run unwarned; count ≥ hard → ``escalate`` (Cline sets the mistake counter to its
    limit, and the user chooses "Try a different approach / Stop this run"; auto-approve
    mode stops).

    The score is 1.0 at the soft count, ``count / hard_threshold`` at every other count
    (≥ 1 from the hard count on), so the detector alarms iff ``score >= 1``. There is no
    ``threshold_param``: the one-shot soft warning is not a threshold on a rising score.

    **Mapping notes**: a nudged call still counts toward the run (the model did propose
    it again), so a model that ignores the warning is handed over at the ``hard``-th
    proposal. The separate mistake tracker (API errors, invalid calls, all-failed turns,
    limit 6) is left out: it counts harness failures our traces do not record.

    >>> det = ClineDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(5):
    ...     call = ToolCall("read_file", {"path": "a.py", "task_progress": f"- [x] step {i}"})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("same"))
    ...     out.append(d.verdict.value)
    >>> out
    ['allow', 'allow', 'nudge', 'allow', 'escalate']
    """

    def __init__(self, *, soft_threshold: int = 3, hard_threshold: int = 5, ignored_params: Sequence[str] = ("task_progress",),
                 enabled: bool = True):
        self.soft_threshold = soft_threshold
        self.hard_threshold = hard_threshold
        self.ignored_params = tuple(ignored_params)
        self.enabled = enabled
        self._key = CallMemo(self._signature)

    def _signature(self, call: ToolCall) -> str:
        args: Any = call.args
        if self.ignored_params and isinstance(args, Mapping) and any(p in args for p in self.ignored_params):
            args = {k: v for k, v in args.items() if k not in self.ignored_params}
        return exact_signature(call.tool, args)

    def start(self) -> Run:
        return EMPTY_RUN

    def check(self, state: Run, call: ToolCall) -> Decision:
        if not self.enabled:
            return Decision(Verdict.ALLOW, 0.0)
        count = state.prior(self._key(call)) + 1
        hard = count >= self.hard_threshold
        if not hard and count != self.soft_threshold:
            return Decision(Verdict.ALLOW, count / max(self.hard_threshold, 1))
        event = ("loop_detection", {"tool": call.tool, "count": count, "level": "hard" if hard else "soft"})
        if not hard:
            return Decision(Verdict.NUDGE, 1.0, message=soft_text(call.tool, count),
                            reason=f"{call.tool} called {count} times in a row (soft {self.soft_threshold})", events=(event,))
        return Decision(Verdict.ESCALATE, count / max(self.hard_threshold, 1), message=soft_text(call.tool, count),
                        reason=f"{call.tool} called {count} times in a row (hard {self.hard_threshold})",
                        events=(event,), stream=(hard_text(call.tool, count),))

    def record(self, state: Run, call: ToolCall, decision: Decision, observation: Observation | None) -> Run:
        return state.extend(self._key(call))

    def on_message(self, state: Run, message: Message) -> Run:
        return EMPTY_RUN if is_user_turn(message) else state
