"""Helpers for the field-baseline tests: build a linear episode with messages and score it."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from detectors.protocol import Detector, Message, Observation, ToolCall
from sim.play.openloop import score_episode
from scenarios.tree import Episode, ThinkNode, ToolNode


def build_episode(items: list[Any]) -> Episode:
    """A chain from ``Message`` objects and ``(tool, args[, content[, error]])`` tuples or ``ToolCall``s."""
    ep = Episode("t")
    parent = None
    for i, item in enumerate(items):
        node_id = f"n{i}"
        if isinstance(item, Message):
            ep.add(ThinkNode(node_id, parent, item))
        else:
            if isinstance(item, ToolCall):
                call, content, error = item, f"result {i}", False
            else:
                tool, args, *rest = item
                call = ToolCall(tool, args, call_id=node_id)
                content = rest[0] if rest else f"result {i}"
                error = rest[1] if len(rest) > 1 else False
            ep.add(ToolNode(node_id, parent, call, Observation(content, error)))
        parent = node_id
    return ep


@pytest.fixture
def episode() -> Callable[[list[Any]], Episode]:
    return build_episode


@pytest.fixture
def verdicts() -> Callable[[Detector, list[Any]], list[str]]:
    """Open-loop verdicts (``"allow"``, ``"nudge"``, …) for every call of the items."""

    def run(detector: Detector, items: list[Any]) -> list[str]:
        return [cs.verdict.value for cs in score_episode(detector, build_episode(items))]

    return run


@pytest.fixture
def scores() -> Callable[[Detector, list[Any]], list[float]]:
    def run(detector: Detector, items: list[Any]) -> list[float]:
        return [cs.score for cs in score_episode(detector, build_episode(items))]

    return run


def feed_calls(detector: Detector, calls: list[ToolCall], observation: Observation | None = None, state: Any = None) -> Any:
    """The state after checking and recording ``calls`` (each answered by ``observation``)."""
    state = detector.start() if state is None else state
    for call in calls:
        state = detector.record(state, call, detector.check(state, call), observation or Observation("r"))
    return state


@pytest.fixture
def feed() -> Callable[..., Any]:
    return feed_calls


def first_alarm(verdict_list: list[str]) -> int | None:
    return next((i for i, v in enumerate(verdict_list) if v != "allow"), None)


@pytest.fixture
def first() -> Callable[[list[str]], int | None]:
    return first_alarm
