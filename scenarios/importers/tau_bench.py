"""Import τ-bench results files: a JSON array of ``{task_id, trial, reward, info, traj}``.

``traj`` is an OpenAI chat message list and goes through the openai importer's
conversion (system wiki, user turns and assistant text become ThinkNodes; tool calls
become ToolNodes). τ-bench reuses ``tool_call_id``s inside a trajectory, so results are
paired with calls by position among calls sharing an id, as the openai importer does.
A tool result is an error when it starts with ``Error:``, the text τ-bench's
environment returns for a failed action.

Episode ids are ``<file stem>:task<task_id>_trial<trial>``; ``meta`` keeps ``task_id``,
``trial`` and ``reward``, and the run's ``outcome``: ``success`` for reward 1, ``failure``
for any other reward, ``unknown`` without one. ``info`` (the task's ground-truth actions
and the reward breakdown) is not imported.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from scenarios.outcome import OUTCOME_KEY, from_reward
from scenarios.tree import Episode

from ._common import EpisodeBuilder, Report, each_file, load_json, unique_id
from .openai_chat import add_conversation

FORMAT = "tau-bench"
SUFFIXES = (".json",)


def is_error(content: str) -> bool:
    return content.startswith("Error:")


def _iter_file(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    data = load_json(path, report)
    if data is None:
        return
    if not isinstance(data, list):
        report(f"{path}: expected a JSON array of result records, skipped")
        return
    for i, rec in enumerate(data):
        where = f"{path}: record {i}"
        if not isinstance(rec, dict) or not isinstance(rec.get("traj"), list):
            report(f"{where}: expected an object with a 'traj' message list, skipped")
            continue
        task_id, trial = rec.get("task_id"), rec.get("trial")
        name = f"task{task_id}_trial{trial}" if task_id is not None and trial is not None else f"record{i}"
        meta = {k: rec[k] for k in ("task_id", "trial", "reward") if isinstance(rec.get(k), (int, float, str))}
        meta[OUTCOME_KEY] = from_reward(rec.get("reward"))
        builder = EpisodeBuilder(unique_id(seen, f"{path.stem}:{name}"), FORMAT, path, record=i, **meta)
        add_conversation(builder, rec["traj"], report, where, is_error=is_error)
        yield builder.ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    """Episodes of a τ-bench results file (or a directory of them); problems go to ``problems``."""
    return each_file(path, SUFFIXES, _iter_file, problems)
