"""``exact``: the tree executor's path-local signature detector (seed 000).

Signature = tool name + stable hash of the arguments with object keys sorted
recursively. Counts live on the path: extending a path returns a new mapping and
never touches the parent's, so sibling branches each start from their parent's
counts. A call whose signature already occurs ``max_repeats`` times on the path is
pruned before it runs.
"""
from __future__ import annotations

from typing import Any, Mapping

from .counting import SignatureCounter
from .pathmap import PathCounts
from .protocol import Decision, Detector, Observation, ToolCall, Verdict, allow
from .signature import exact_key, ordered_json
from .params import Range



def stream_line(call: ToolCall) -> str:
    """The line the seed streams to the user when it prunes a call."""
    args = ordered_json(call.args).decode("utf-8", "replace")
    return f"[tree] Loop detected: {call.tool}({args}) already in path — pruning branch"


class ExactDetector(SignatureCounter):
    """Prune a call whose exact signature already appears ``max_repeats`` times on its path.

    Parameters
    ----------
    max_repeats_per_signature:
        How often one (tool, args) pair may occur on a path; the seed default 1 means a
        pair may not repeat at all.
    tool_overrides:
        Per-tool settings from the tool registry, e.g. ``{"http_get": {"max_repeats": 3}}``
        for a retry-safe tool, or ``{"check_status": {"exempt": True}}``.

    >>> det = ExactDetector()
    >>> s = det.start()
    >>> call = ToolCall("search", {"q": "x", "n": 1})
    >>> s = det.record(s, call, det.check(s, call), Observation("r"))
    >>> det.check(s, ToolCall("search", {"n": 1, "q": "x"})).verdict
    <Verdict.PRUNE: 'prune'>
    """

    threshold_param = "max_repeats_per_signature"
    param_ranges = {"max_repeats_per_signature": Range(1)}
    #: ``loopbench tune``: per-tool values tried, least permissive first; both keys only move the threshold.
    tune_candidates = {"max_repeats": (1, 2, 3, 4, 5), "exempt": (True,)}
    tune_fast_keys = ("max_repeats", "exempt")
    signature_key = staticmethod(exact_key)
    override_key = "max_repeats"

    def __init__(self, *, max_repeats_per_signature: int = 1, tool_overrides: Mapping[str, Mapping[str, Any]] | None = None):
        self.max_repeats_per_signature = max_repeats_per_signature
        self.tool_overrides = tool_overrides

    def check(self, state: PathCounts, call: ToolCall) -> Decision:
        count = state.get(self._signature(call), 0)
        limit = self._limit(call.tool, self.max_repeats_per_signature)
        if count < limit:
            return allow(count)
        line = stream_line(call)
        return Decision(
            Verdict.PRUNE,
            float(count),
            reason=f"{call.tool} with these arguments already ran {count} time(s) on this path (limit {limit})",
            events=(("loop:detected", {"tool": call.tool, "args": call.args, "count": count}),),
            stream=(line,),
        )

    def record(self, state: PathCounts, call: ToolCall, decision: Decision, observation: Observation | None) -> PathCounts:
        if observation is None or observation.nudge:
            return state  # a pruned call never ran, so it does not extend the path
        sig = self._signature(call)
        return state.incremented(sig)
