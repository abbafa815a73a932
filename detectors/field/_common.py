"""Pieces the field baselines share: a per-call memo, observation keys, consecutive runs.

Each peer decides for itself what makes two calls equal; these helpers only make sure
that the shared mechanics (hash once per call, key an observation, count a run of
identical calls) live in one place.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable

from ..protocol import Message, Observation, ToolCall
from ..signature import canonical_json, stable_hash


class CallMemo:
    """Remember ``fn(call)`` for the last call seen.

    ``check`` and ``record`` are handed the same call object back to back, so the
    signature is computed once per call (the trick of ``detectors/exact.py``).
    """

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


def observation_key(observation: Observation) -> int:
    """A stable hash of what a tool returned, error flag included (no normalisation)."""
    return stable_hash((bool(observation.error), observation.content))


def observation_text(observation: Observation) -> str:
    """The observation as text, for peers that look at error messages."""
    content = observation.content
    if isinstance(content, str):
        return content
    return canonical_json(content).decode("utf-8", "replace")


def is_user_turn(message: Message) -> bool:
    """A message from the user starts a new prompt; assistant and harness messages do not."""
    return message.role == "user"


@dataclass(frozen=True, slots=True)
class Run:
    """The trailing run of identical calls on a path: its key and its length."""

    key: Hashable = None
    length: int = 0

    def prior(self, key: Hashable) -> int:
        """How many calls identical to ``key`` immediately precede it."""
        return self.length if self.length and key == self.key else 0

    def extend(self, key: Hashable) -> "Run":
        return Run(key, self.prior(key) + 1)


EMPTY_RUN = Run()
