"""How a run ended, as an episode carries it (SPEC §11): ``meta["outcome"]`` and ``meta["mistake_step"]``.

``outcome`` is ``success``, ``failure`` or ``unknown`` (a missing key reads as unknown);
``mistake_step`` is the 0-based index, among the episode's tool calls, of the call a
source's annotation blames for the failure, only where the source records one. Tokens
per call live on ``ToolNode.tokens`` (0 = not recorded).

Importers and the real suite write these keys; the trace format keeps them in the
episode header's ``meta``; the scorer writes the outcome into ``episodes.csv``.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

OUTCOME_KEY = "outcome"
MISTAKE_KEY = "mistake_step"
SUCCESS, FAILURE, UNKNOWN = "success", "failure", "unknown"
OUTCOMES = (SUCCESS, FAILURE, UNKNOWN)
#: The sections of a Reflexion ReAct log -> how their agents' runs ended (HALTED: out of steps).
SECTION_OUTCOMES = {"correct": SUCCESS, "incorrect": FAILURE, "halted": FAILURE}


def run_outcome(meta: Mapping[str, Any]) -> str:
    """The outcome an episode's meta records: ``unknown`` when absent or not one of :data:`OUTCOMES`."""
    value = meta.get(OUTCOME_KEY)
    return value if value in OUTCOMES else UNKNOWN


def from_reward(reward: Any) -> str:
    """A graded run (τ-bench): reward 1 is a solved task, any other number a failed one."""
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return UNKNOWN
    return SUCCESS if reward >= 1 else FAILURE


def outcome_meta(outcome: str, mistake_step: int | None = None) -> dict[str, Any]:
    """The meta entries of an outcome (and the blamed call, when there is one)."""
    out: dict[str, Any] = {OUTCOME_KEY: outcome}
    if mistake_step is not None:
        out[MISTAKE_KEY] = mistake_step
    return out


def history_step(raw: Any) -> int | None:
    """An annotated step of a log's message history (Who&When writes it as text: ``"12"``)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw >= 0 else None
    if isinstance(raw, str) and raw.strip().isdigit():
        return int(raw.strip())
    return None


def call_at_step(turns: Iterable[int | None], step: int) -> int | None:
    """The tool-call index of the first call made at or after message ``step`` of a history.

    ``turns`` holds each call's message index in order. A blamed message that is not
    itself a call (a plan, a reply) shows in the next call the run makes; ``None`` when
    no call follows it.
    """
    return next((i for i, t in enumerate(turns) if t is not None and t >= step), None)


def meta_problem(meta: Mapping[str, Any]) -> str | None:
    """Why a trace header's outcome fields are unusable, or ``None`` when they are fine (or absent)."""
    if OUTCOME_KEY in meta and meta[OUTCOME_KEY] not in OUTCOMES:
        return f"meta field 'outcome' must be one of {', '.join(OUTCOMES)}, got {str(meta[OUTCOME_KEY])[:40]!r}"
    if MISTAKE_KEY in meta:
        step = meta[MISTAKE_KEY]
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            return f"meta field 'mistake_step' must be a non-negative integer (a tool-call index), got {str(step)[:40]!r}"
    return None
