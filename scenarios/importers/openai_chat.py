"""Import OpenAI-style chat transcripts: JSON Lines, one conversation per line.

A line is ``{"messages": [...]}`` (other keys are ignored) or a bare list of messages.
Mapping:

- ``system`` / ``user`` / ``assistant`` messages (any role but ``tool``/``function``)
  become ThinkNodes with that role; an assistant message that only carries tool calls
  and no text gets no ThinkNode.
- each entry of an assistant's ``tool_calls`` (``{id, function: {name, arguments}}``)
  becomes a ToolNode; ``arguments`` is a JSON string and is parsed, and text that is
  not a JSON object is kept as ``{"_raw": text}`` with a problem noted. The legacy
  ``function_call`` field is one call without an id. ``turn`` is the message's index.
- a ``tool`` message is the result of the open call with its ``tool_call_id``; when
  several open calls share that id (formats that reuse ids), the oldest one takes it,
  i.e. calls and results are paired by position. A result without an id (legacy
  ``function`` role) goes to the oldest open call. The trace format needs unique ids,
  so a reused id is written as ``<id>~2``, ``<id>~3``...

Episode ids are ``<file stem>:<k>`` with k the 0-based index of the line among the
file's non-blank lines, so a malformed line never renumbers the others. A ``.json`` file
whose first line is no JSON value on its own holds one conversation, pretty-printed (a
mini-swe-agent ``*.traj.json``: ``{"messages": [...], "info": ...}``): its id is the file
name without ``.json``. A tool result that opens with ``<returncode>N</returncode>`` (how
mini-swe-agent reports a command) is an error when N is not 0, and so is one that opens with
``<exception>`` (a command that could not finish: a time-out). mini-swe-agent before 2.0
(``"trajectory_format": "mini-swe-agent-1"``, the runs of SWE-bench's bash-only leaderboard)
called no tools: its action is the one ```` ```bash ```` block of an assistant message, run as a
``bash`` call with ``{"command": ...}``, and the next user message is its result (its time-out
message, "The last command ... timed out", an error); a message with no block or several ran
nothing (the agent was told to send exactly one). A folder is searched recursively
(mini-swe-agent writes ``<instance>/<instance>.traj.json``, and its ``preds.json`` of patches
beside them is passed over).

A chat transcript does not say how the run ended: the outcome is ``unknown`` unless the
line gives one as ``"outcome": "success" | "failure" | "unknown"`` beside ``messages``
(another value is reported and read as unknown).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterator

from scenarios.outcome import OUTCOME_KEY, OUTCOMES, UNKNOWN
from scenarios.tree import Episode, ToolNode

import orjson

from scenarios.trace import loads_json

from ._common import EpisodeBuilder, Report, as_text, each_file, json_records, load_json, parse_arguments, unique_id

FORMAT = "openai"
SUFFIXES = (".jsonl", ".json", ".ndjson")
_RETURNCODE = re.compile(r"\s*<returncode>\s*(-?\d+)\s*</returncode>")
# mini-swe-agent 1.x's action: the one bash block of a reply (its own parsing rule).
_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
#: The ``trajectory_format`` of mini-swe-agent runs whose actions are bash blocks in the text.
TEXT_ACTIONS_FORMAT = "mini-swe-agent-1"


def add_conversation(
    builder: EpisodeBuilder,
    messages: list[Any],
    report: Report,
    where: str,
    is_error: Callable[[str], bool] | None = None,
    text_actions: bool = False,
) -> None:
    """Append an OpenAI message list to ``builder``; ``is_error`` flags failed tool results.
    With ``text_actions`` an assistant message that calls no tool and holds exactly one bash
    block is a ``bash`` call, and the user message after it is the call's result."""
    open_calls: list[tuple[str | None, ToolNode]] = []  # (source call id, node), oldest first
    text_call: ToolNode | None = None  # a bash block's call awaiting the next user message

    for j, msg in enumerate(messages):
        here = f"{where}: message {j}"
        if not isinstance(msg, dict):
            report(f"{here}: a message must be an object, skipped")
            continue
        role = msg.get("role")
        if not isinstance(role, str):
            report(f"{here}: missing or non-string 'role', skipped")
            continue
        if role == "user" and text_call is not None:
            content = as_text(msg.get("content"))
            builder.result(text_call, content, bool(is_error and is_error(content)))
            text_call = None
            continue
        if role in ("tool", "function"):
            content = as_text(msg.get("content"))
            cid = msg.get("tool_call_id")
            node = _take(open_calls, None if cid is None else str(cid), report, here)
            if node is not None:
                builder.result(node, content, bool(is_error and is_error(content)))
            continue

        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list):
            report(f"{here}: 'tool_calls' must be an array, ignored")
            calls = []
        legacy = msg.get("function_call")
        if isinstance(legacy, dict):
            calls = [*calls, {"function": legacy}]
        content = as_text(msg.get("content"))
        if content or not calls:
            builder.message(role, content)
        if text_actions and role == "assistant" and not calls:
            blocks = bash_blocks(content)
            if len(blocks) == 1:
                text_call = builder.call("bash", {"command": blocks[0].strip()}, None, turn=j)
        for k, tc in enumerate(calls):
            fn = tc.get("function") if isinstance(tc, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str) or not name:
                report(f"{here}: tool_calls[{k}] has no function name, skipped")
                continue
            args = parse_arguments(fn.get("arguments"), report, f"{here}: tool_calls[{k}] ({name})")
            cid = tc.get("id")
            node = builder.call(name, args, None if cid is None else str(cid), turn=j)
            open_calls.append((None if cid is None else str(cid), node))


def bash_blocks(text: str) -> list[str]:
    """The bash blocks of a reply, as mini-swe-agent 1.x finds them (its pattern), searched only
    up to the reply's last closing fence: past it no block can close, and a lazy search from
    each of many unclosed openings (a hostile trace) would take quadratic time."""
    last = text.rfind("\n```")
    return [] if last < 0 else _BASH_BLOCK.findall(text, 0, last + 4)


def _take(open_calls: list[tuple[str | None, ToolNode]], cid: str | None, report: Report, here: str) -> ToolNode | None:
    for i, (source_id, node) in enumerate(open_calls):
        if cid is None or source_id == cid:
            return open_calls.pop(i)[1]
    if open_calls:
        # An id that matches no open call: the nearest faithful reading is by position.
        node = open_calls.pop(0)[1]
        report(f"{here}: tool_call_id {cid!r} matches no open call; paired by position with {node.call.call_id!r}")
        return node
    report(f"{here}: tool result {cid!r} has no earlier call awaiting a result, skipped")
    return None


def _returncode_error(content: str) -> bool:
    """mini-swe-agent renders a command's result as ``<returncode>N</returncode>...``, after an
    ``<exception>...</exception>`` when the command could not finish (a time-out)."""
    head = content.lstrip()
    if head.startswith("<exception>") or (head.startswith("The last command") and "timed out" in head[:5000]):
        return True
    m = _RETURNCODE.match(content)
    return m is not None and m.group(1) != "0"


def _one_document(path: Path) -> bool:
    """A ``.json`` file holding one pretty-printed conversation (a mini-swe-agent
    ``*.traj.json``), not one conversation per line: its first line is no JSON on its own."""
    if not path.name.endswith(".json"):
        return False
    with path.open("rb") as fh:
        first = fh.readline(1 << 20).strip()
    try:
        loads_json(first)
    except orjson.JSONDecodeError:
        return True
    return False


def _conversation(path: Path, report: Report, seen: set[str], wanted_id: str, where: str, rec: Any,
                  **meta: Any) -> Episode | None:
    messages = rec.get("messages") if isinstance(rec, dict) else rec
    if not isinstance(messages, list):
        report(f"{where}: expected {{\"messages\": [...]}} or a list of messages, skipped")
        return None
    outcome = rec.get(OUTCOME_KEY, UNKNOWN) if isinstance(rec, dict) else UNKNOWN
    if outcome not in OUTCOMES:
        report(f"{where}: 'outcome' must be one of {', '.join(OUTCOMES)}, got {str(outcome)[:40]!r}; read as unknown")
        outcome = UNKNOWN
    builder = EpisodeBuilder(unique_id(seen, wanted_id), FORMAT, path, **meta, **{OUTCOME_KEY: outcome})
    text_actions = isinstance(rec, dict) and rec.get("trajectory_format") == TEXT_ACTIONS_FORMAT
    add_conversation(builder, messages, report, where, _returncode_error, text_actions)
    return builder.ep


def _predictions(rec: Any) -> bool:
    """mini-swe-agent's ``preds.json`` beside its runs: ``{instance: {"model_patch": ...}}``."""
    return (isinstance(rec, dict) and bool(rec) and "messages" not in rec
            and all(isinstance(v, dict) and "model_patch" in v for v in rec.values()))


def _iter_file(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    if _one_document(path):
        rec = load_json(path, report)
        if _predictions(rec):
            return  # the run's patches, no conversation: nothing to skip or report
        if rec is not None:
            ep = _conversation(path, report, seen, path.name.removesuffix(".json"), str(path), rec)
            if ep is not None:
                yield ep
        return
    for k, lineno, rec in json_records(path, report):
        ep = _conversation(path, report, seen, f"{path.stem}:{k}", f"{path}:{lineno}", rec, line=lineno)
        if ep is not None:
            yield ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    """Episodes of an OpenAI chat JSONL file (or a directory of them); problems go to ``problems``."""
    return each_file(path, SUFFIXES, _iter_file, problems, recursive=True)
