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
from scenarios.tree import Episode, ToolNode

from . import captain_agent, claude_code, codex, magentic_one, openai_chat, openhands, otel, react_log, swe_agent, tau_bench

#: format name -> ``iter_episodes(path, problems=None)``
FORMATS: dict[str, Callable[..., Iterator[Episode]]] = {
    openai_chat.FORMAT: openai_chat.iter_episodes,
    tau_bench.FORMAT: tau_bench.iter_episodes,
    react_log.FORMAT: react_log.iter_episodes,
    magentic_one.FORMAT: magentic_one.iter_episodes,
    captain_agent.FORMAT: captain_agent.iter_episodes,
    otel.FORMAT: otel.iter_episodes,
    openhands.FORMAT: openhands.iter_episodes,
    claude_code.FORMAT: claude_code.iter_episodes,
    swe_agent.FORMAT: swe_agent.iter_episodes,
    codex.FORMAT: codex.iter_episodes,
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


def convert(fmt: str, path: str | os.PathLike, out_path: str | os.PathLike,
            notes: list[str] | None = None, resolved: dict[str, bool] | None = None) -> tuple[int, list[str]]:
    """Import ``path`` and write it as a loopbench trace; returns (episodes written, problems).
    ``notes`` (when given) receives what the source did not record (not a problem: the calls
    are imported all the same). ``resolved`` (an evaluation's ``instance -> resolved``,
    ``graded.read_reports``) grades the runs whose format records no outcome."""
    episodes, problems = import_file(fmt, path)
    if resolved is not None:
        from .graded import grade

        n = grade(episodes, resolved)
        if notes is not None:
            notes.append(f"note: {n} of {len(episodes)} runs graded by {len(resolved)} evaluation reports")
    write_trace(out_path, episodes)
    if notes is not None:
        notes.extend(missing_content(episodes))
    return len(episodes), problems


def missing_content(episodes: list[Episode]) -> list[str]:
    """One line per kind of content the source left out: calls without a recorded result,
    calls without arguments (tracing that keeps no content, the default of several
    frameworks' instrumentation; docs/traces.md says how to turn it on)."""
    calls = [n for ep in episodes for n in ep.nodes if isinstance(n, ToolNode)]
    no_result = sum(1 for n in calls if n.observation is not None and not n.observation.recorded)
    no_args = sum(1 for n in calls if not n.call.args)
    lines = []
    if no_result:
        lines.append(f"note: {no_result} of {len(calls)} tool calls have no recorded result (imported as "
                     "unrecorded); to record results see docs/traces.md, 'Results and arguments in framework traces'")
    if no_args:
        lines.append(f"note: {no_args} of {len(calls)} tool calls have no arguments; if the tools take some, "
                     "the tracing kept no content (docs/traces.md, 'Results and arguments in framework traces')")
    return lines
