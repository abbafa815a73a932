"""Pieces the field baselines share: observation keys, consecutive runs.

Each peer decides for itself what makes two calls equal; these helpers only make sure
that the shared mechanics (key an observation, count a run of identical calls) live in
one place. Hashing once per call is ``detectors.callmemo.CallMemo``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from ..protocol import Message, Observation, result_known
from ..signature import content_text, stable_hash


def observation_key(observation: Observation) -> int | None:
    """A stable hash of what a tool returned, error flag included (no normalisation);
    ``None`` when the call ran without a recorded result (there is nothing to compare)."""
    if not result_known(observation):
        return None
    return stable_hash((bool(observation.error), observation.content))


def observation_text(observation: Observation) -> str:
    """The observation as text, for peers that look at error messages."""
    return content_text(observation.content)


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
