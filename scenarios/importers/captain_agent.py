"""Import CaptainAgent (AG2) group-chat logs in the Who&When layout: one JSON file per run.

A file is an object whose ``history`` is a list of ``{content, role, name}``. ``role``
is relative to whichever agent's chat was saved, so ``name`` says who spoke. Mapping:

- ``history[0]`` is the task prompt the chat starts with (the manager's task, plan and
  earlier results) -> a ``user`` ThinkNode. Every later expert message -> an
  ``assistant`` ThinkNode with the text verbatim (the speaker's name is not kept: a
  Message has only a role and content).
- Code is run the AG2 way: when a message holds fenced code blocks, the
  ``Computer_terminal`` agent executes all of them together and answers in the next
  message. So a message with at least one fenced block (including ``history[0]``) is
  followed by one call ``execute_code {"blocks": [{"language": l, "code": c}, ...]}``,
  in the message's order, whose result is the next message if that is
  ``Computer_terminal``'s (an error when its ``exitcode`` is not 0). A code message
  that the terminal does not answer next keeps no result.
- A ``Computer_terminal`` message with no code before it (``There is no code from the
  last 1 message ...``) -> a ``user`` ThinkNode: the terminal is AG2's user proxy.

Episode ids are the file stem; ``meta`` keeps ``question_ID``, the run's ``outcome``
(``failure``: Who&When annotates failed runs) and, as ``mistake_step``, the index of the
first tool call at or after the annotated history step. The annotations' text
(``ground_truth``, ``mistake_agent``, ``mistake_reason``), ``is_correct``, ``labels``
and the agents' ``system_prompt`` are not imported, and no labels are set.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from scenarios.tree import Episode, ToolNode

from ._common import Report, as_text, blame_call, each_file, history_run

FORMAT = "captain-agent"
SUFFIXES = (".json",)
TERMINAL = "Computer_terminal"

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.M | re.S)
_EXITCODE = re.compile(r"^exitcode: (-?\d+)")


def code_blocks(text: str) -> list[dict[str, str]]:
    """The fenced code blocks of a message, in order."""
    return [{"language": lang, "code": code.rstrip("\n")} for lang, code in _FENCE.findall(text)]


def _iter_file(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    run = history_run(path, report, seen, FORMAT)
    if run is None:
        return
    b, history, mistake = run
    last_code: ToolNode | None = None  # the call of the message just before, awaiting the terminal
    for j, msg in enumerate(history):
        if not isinstance(msg, dict) or not isinstance(msg.get("name", msg.get("role")), str):
            report(f"{path}: history[{j}]: expected an object with a string 'name', skipped")
            last_code = None
            continue
        content = as_text(msg.get("content"))
        if msg.get("name") == TERMINAL:
            if last_code is not None:
                m = _EXITCODE.match(content)
                b.result(last_code, content, bool(m and int(m.group(1)) != 0))
            else:
                b.message("user", content)
            last_code = None
            continue
        b.message("user" if j == 0 else "assistant", content)
        blocks = code_blocks(content)
        last_code = b.call("execute_code", {"blocks": blocks}, turn=j) if blocks else None
    blame_call(b.ep, mistake)
    yield b.ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    """Episodes of CaptainAgent log files (a file or a directory); problems go to ``problems``."""
    return each_file(path, SUFFIXES, _iter_file, problems)
