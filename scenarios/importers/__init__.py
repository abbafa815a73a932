"""Importers of real agent-trace formats into loopbench episodes (SPEC §6), by format name.

Each format's ``iter_episodes(path, problems=None)`` reads a file (or a directory of
them) and yields linear, unlabelled ``family="replay"`` episodes whose ``meta`` names
the source format and file; a malformed record becomes a one-line problem naming the
file and line or record, and the rest is still imported. ``convert`` writes the result
in our JSON Lines trace format.
"""
from __future__ import annotations

import os
from typing import Callable, Iterator

from scenarios.trace import write_trace
from scenarios.tree import Episode

from . import captain_agent, magentic_one, openai_chat, otel, react_log, tau_bench

#: format name -> ``iter_episodes(path, problems=None)``
FORMATS: dict[str, Callable[..., Iterator[Episode]]] = {
    openai_chat.FORMAT: openai_chat.iter_episodes,
    tau_bench.FORMAT: tau_bench.iter_episodes,
    react_log.FORMAT: react_log.iter_episodes,
    magentic_one.FORMAT: magentic_one.iter_episodes,
    captain_agent.FORMAT: captain_agent.iter_episodes,
    otel.FORMAT: otel.iter_episodes,
}


def get_format(fmt: str) -> Callable[..., Iterator[Episode]]:
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown trace format {fmt!r}; known formats: {', '.join(FORMATS)}") from None


def import_file(fmt: str, path: str | os.PathLike) -> tuple[list[Episode], list[str]]:
    """All episodes of ``path`` in format ``fmt``, and the problems met on the way.

    Raises ``ValueError`` for an unknown format and ``scenarios.trace.TraceError`` when the
    path does not exist.
    """
    problems: list[str] = []
    episodes = list(get_format(fmt)(path, problems))
    return episodes, problems


def convert(fmt: str, path: str | os.PathLike, out_path: str | os.PathLike) -> tuple[int, list[str]]:
    """Import ``path`` and write it as a loopbench trace; returns (episodes written, problems)."""
    episodes, problems = import_file(fmt, path)
    write_trace(out_path, episodes)
    return len(episodes), problems
