"""``normalized``: the signature guard of seed 002, with its in-band nudge.

Arguments are normalised (keys sorted, string values stripped and lower-cased), one
counter covers the whole run, and at the threshold (3) the guard does not raise: it
returns a message that becomes the call's observation.
"""
from __future__ import annotations

from typing import Any, Mapping

from .counting import SignatureCounter
from .pathmap import PathCounts
from .protocol import Decision, allow, Detector, Observation, ToolCall, Verdict
from .signature import normalized_key
from .params import Range



def nudge_text(tool: str, count: int) -> str:
    """The seed's in-band message, word for word."""
    return (
        f"Loop guard: you have called {tool} with these "
        f"arguments {count} times and the result has not "
        f"changed. Do not repeat it. Either use a different tool, "
        f"change the arguments, or give your best answer now."
    )


class NormalizedDetector(SignatureCounter):
    """Nudge when a normalised signature is seen ``threshold`` times in the run.

    Like the seed's ``LoopGuard``, the count includes the call being checked and grows
    whether or not the guard trips; the counter is run-wide, so repeats on sibling
    branches add up.

    >>> det = NormalizedDetector()
    >>> s = det.start()
    >>> for q in ["Q3 revenue", "q3 revenue ", "Q3 REVENUE"]:
    ...     d = det.check(s, ToolCall("search", {"q": q}))
    ...     s = det.record(s, ToolCall("search", {"q": q}), d, Observation("same"))
    >>> d.verdict, d.message[:40]
    (<Verdict.NUDGE: 'nudge'>, 'Loop guard: you have called search with ')
    """

    scope = "run"
    threshold_param = "threshold"
    param_ranges = {"threshold": Range(1)}
    tune_candidates = {"threshold": (2, 3, 4, 5, 6), "exempt": (True,)}
    tune_fast_keys = ("threshold", "exempt")
    signature_key = staticmethod(normalized_key)
    override_key = "threshold"

    def __init__(self, *, threshold: int = 3, tool_overrides: Mapping[str, Mapping[str, Any]] | None = None):
        self.threshold = threshold
        self.tool_overrides = tool_overrides

    def check(self, state: PathCounts, call: ToolCall) -> Decision:
        count = state.get(self._signature(call), 0) + 1
        limit = self.threshold_for(call.tool, self.threshold) if self.tool_overrides else self.threshold
        if count < limit:
            return allow(count)
        return Decision(
            Verdict.NUDGE,
            float(count),
            message=nudge_text(call.tool, count),
            reason=f"{call.tool} called {count} times with the same normalised arguments",
        )

    def record(self, state: PathCounts, call: ToolCall, decision: Decision, observation: Observation | None) -> PathCounts:
        sig = self._signature(call)
        return state.incremented(sig)
