"""``CallMemo``: what a detector derives from a call, computed once per call.

The harness hands ``check`` and ``record`` the same call object back to back, so a
signature, a prepared form or an embedding looked up in ``check`` is reused by
``record``. One slot, keyed by object identity: equal but distinct calls (a repeat
later in the run) are computed afresh, which is exactly right for a memo of one call.
"""
from __future__ import annotations

from typing import Any, Callable

from .protocol import ToolCall


class CallMemo:
    """Remember ``fn(call)`` for the last call seen."""

    __slots__ = ("fn", "_call", "_value")

    def __init__(self, fn: Callable[[ToolCall], Any]):
        self.fn = fn
        self._call: ToolCall | None = None
        self._value: Any = None

    def __call__(self, call: ToolCall) -> Any:
        if call is not self._call:
            self._value = self.fn(call)
            self._call = call
        return self._value
