"""Import Magentic-One (AutoGen) run logs in the Who&When layout: one JSON file per run.

A file is an object whose ``history`` is a list of ``{role, content}``. The log has no
structured tool calls, so the mapping reads the roles and WebSurfer's own sentences:

- ``human`` -> a ``user`` ThinkNode; ``Orchestrator (thought)`` (plans, ledgers) and
  ``Orchestrator (termination condition)`` -> ``assistant`` ThinkNodes.
- ``Orchestrator (-> Agent)`` is the orchestrator's tool call: ``delegate {"agent":
  Agent, "instruction": text}``. Its result is Agent's next message, in full, because
  that is what the orchestrator receives; a delegation that gets no reply (the run
  ends, or the orchestrator delegates to the same agent again first) ran without a
  recorded result (``"recorded": false``). A ComputerTerminal reply is an error when it reports a
  non-zero exit code.
- A WebSurfer message is also one browser action, parsed from the sentence it starts
  with (Magentic-One's own tool names): ``I clicked 'x'.`` -> ``click {"target": x}``
  (``I clicked the control.`` -> ``click {}``), ``I typed 'x' into 'f'.`` ->
  ``input_text {"text": x, "field": f}`` (``I input 'x'.`` -> ``input_text {"text":
  x}``), ``I typed 'u' into the browser address bar.`` -> ``visit_url {"url": u}``,
  ``I typed 'q' into the browser search bar.`` -> ``web_search {"query": q}``,
  ``I scrolled down/up one page in the browser.`` -> ``page_down {}`` / ``page_up {}``,
  ``I scrolled 'x' down/up.`` -> ``scroll_element_down/up {"target": x}``, ``I clicked
  the browser back button.`` -> ``history_back {}``, the waiting sentence -> ``sleep
  {}``. A message that starts with none of these is a free-text answer about the page
  (Magentic-One's ``summarize_page`` / ``answer_question``, whose arguments the log
  does not keep) -> ``read_page {}``. The browser call's result is the rest of the
  message (the screenshot description and page text), or all of it for ``read_page``.
  So a delegation to WebSurfer is followed by the browser call it caused.
- A message from another agent that nobody delegated to -> an ``assistant`` ThinkNode.

Episode ids are the file stem (``41`` for ``41.json``); ``meta`` keeps ``question_ID``,
the run's ``outcome`` (``failure``: Who&When annotates failed runs) and, as
``mistake_step``, the index of the first tool call at or after the annotated history step.
The annotations' text (``ground_truth``, ``mistake_agent``, ``mistake_reason``) and
``is_corrected`` are not imported, and no labels are set.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from scenarios.tree import Episode, ToolNode

from ._common import Report, as_text, blame_call, each_file, history_run

FORMAT = "magentic-one"
SUFFIXES = (".json",)

_DELEGATE = re.compile(r"^Orchestrator \(-> (.+)\)$")
_END = r"(?=\s|$)"
#: (pattern at the start of a WebSurfer message, tool, names of the captured arguments)
BROWSER_ACTIONS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = tuple(
    (re.compile(pattern + _END, re.S), tool, names)
    for pattern, tool, names in (
        (r"^I typed '(.*?)' into the browser address bar\.", "visit_url", ("url",)),
        (r"^I typed '(.*?)' into the browser search bar\.", "web_search", ("query",)),
        (r"^I typed '(.*?)' into '(.*?)'\.", "input_text", ("text", "field")),
        (r"^I input '(.*?)'\.", "input_text", ("text",)),
        (r"^I clicked the browser back button\.", "history_back", ()),
        (r"^I clicked the control\.", "click", ()),
        (r"^I clicked '(.*?)'\.", "click", ("target",)),
        (r"^I scrolled down one page in the browser\.", "page_down", ()),
        (r"^I scrolled up one page in the browser\.", "page_up", ()),
        (r"^I scrolled '(.*?)' down\.", "scroll_element_down", ("target",)),
        (r"^I scrolled '(.*?)' up\.", "scroll_element_up", ("target",)),
        (r"^I am waiting a short period of time before taking further action\.", "sleep", ()),
    )
)
_EXIT = re.compile(r"exit code:? (-?\d+)", re.I)


def parse_browser_action(text: str) -> tuple[str, dict[str, str], str]:
    """``(tool, args, rest of the message)`` for a WebSurfer message."""
    for pattern, tool, names in BROWSER_ACTIONS:
        m = pattern.match(text)
        if m:
            return tool, dict(zip(names, m.groups())), text[m.end():].lstrip()
    return "read_page", {}, text


def _terminal_error(text: str) -> bool:
    m = _EXIT.search(text)
    return bool(m and int(m.group(1)) != 0)


def _iter_file(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    run = history_run(path, report, seen, FORMAT)
    if run is None:
        return
    b, history, mistake = run
    waiting: dict[str, ToolNode] = {}  # agent -> its delegation that has no reply yet
    for j, msg in enumerate(history):
        role = msg.get("role") if isinstance(msg, dict) else None
        if not isinstance(role, str):
            report(f"{path}: history[{j}]: expected an object with a string 'role', skipped")
            continue
        content = as_text(msg.get("content"))
        if role == "human":
            b.message("user", content)
        elif m := _DELEGATE.match(role):
            agent = m.group(1)
            unanswered = waiting.get(agent)
            if unanswered is not None:
                b.unrecorded(unanswered)
            waiting[agent] = b.call("delegate", {"agent": agent, "instruction": content}, turn=j)
        elif role.startswith("Orchestrator"):
            b.message("assistant", content)
        else:
            delegation = waiting.pop(role, None)
            if delegation is not None:
                b.result(delegation, content, role == "ComputerTerminal" and _terminal_error(content))
            if role == "WebSurfer":
                tool, args, rest = parse_browser_action(content)
                b.result(b.call(tool, args, turn=j), rest)
            elif delegation is None:
                b.message("assistant", content)
    for unanswered in waiting.values():
        b.unrecorded(unanswered)
    blame_call(b.ep, mistake)
    yield b.ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    """Episodes of Magentic-One log files (a file or a directory); problems go to ``problems``."""
    return each_file(path, SUFFIXES, _iter_file, problems)
