"""What the two seed guards share: a signature per call, counted in a persistent map.

``exact`` and ``normalized`` differ in their signature (sorted-key hash vs the seed-002
normalisation), their scope and their verdict; the counting, the per-tool override
lookup and the once-per-call hashing live here.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Mapping

from .pathmap import EMPTY, PathCounts
from .protocol import Detector, ToolCall, tool_exempt, tool_param


class SignatureCounter(Detector):
    """Base for detectors that count call signatures.

    Subclasses set ``signature_key`` (``(tool, args) -> hashable``) and ``override_key``
    (the per-tool entry in ``tool_overrides`` that replaces the threshold), and store
    ``tool_overrides`` in ``__init__``.
    """

    signature_key: ClassVar[Callable[[str, Any], Any]]
    override_key: ClassVar[str]
    tool_overrides: Mapping[str, Mapping[str, Any]] | None
    _memo: tuple[ToolCall | None, Any] = (None, None)

    def start(self) -> PathCounts:
        return EMPTY

    def _signature(self, call: ToolCall) -> Any:
        # check() and record() see the same call object back to back; hash it once. This is
        # detectors.callmemo.CallMemo inlined: its two extra Python frames cost ~0.3 us per
        # check (bench/bench_checks.py), a third of exact's 1 us budget.
        memo_call, memo_sig = self._memo
        if memo_call is call:
            return memo_sig
        sig = type(self).signature_key(call.tool, call.args)
        self._memo = (call, sig)
        return sig

    def threshold_for(self, tool: str, value: float) -> float:
        if tool_exempt(self.tool_overrides, tool):
            return float("inf")
        return tool_param(self.tool_overrides, tool, self.override_key, value)

    def _limit(self, tool: str, value: float) -> float:
        return self.threshold_for(tool, value) if self.tool_overrides else value
