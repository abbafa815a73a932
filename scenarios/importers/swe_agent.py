"""Import SWE-agent trajectories: ``<instance>.traj``, one run per file.

SWE-agent (``sweagent run`` / ``run-batch``) writes a JSON document per task with
``trajectory`` (one step per executed action: ``action``, ``observation``, ``response``,
``thought``), ``history`` (the messages the model saw), ``info`` (``exit_status``,
``submission``, ...) and the ``replay_config``. Mapping, one ToolNode per step whose
``action`` is not blank (an auto-submission after a cost or context limit has none):

- The call is the one the model made, whichever way SWE-agent parsed it:
  ``function_calling`` (1.x, the default): the ``tool_calls`` of the ``history`` message
  that issued the step's action, arguments parsed like the ``openai`` importer does;
  ``xml_function_calling``: the ``<function=NAME>`` block of the step's ``response`` with
  its ``<parameter=KEY>value</parameter>`` arguments; otherwise (``thought_action``, 0.x)
  the action line itself. An action line is SWE-agent's rendering of the call, ``tool
  positional... --flag value``: ``str_replace_editor view /path --view_range 1 50`` becomes
  ``str_replace_editor {command: "view", path, view_range: [1, 50]}``, a command of the
  0.x set (``open``, ``edit``, ``create``, ``find_file``, ``search_dir``, ``scroll_down``,
  ``submit``...) ``NAME {command: the rest of the line}`` (compared as code: an edit's new
  lines are no prose to be reworded), and anything else is a shell command,
  ``bash {command}``: the names the tool effects of ``detectors/effects.py`` know.
- The result is the step's ``observation``. SWE-agent keeps no exit code, so a result is an
  error only where the tool's text says so: the editor's refusals (``No replacement was
  performed``, a path that does not exist, a missing or invalid parameter, ``File already
  exists``) and a 0.x ``edit`` that introduced a syntax error (not applied).
- A step's ``thought`` becomes an ``assistant`` ThinkNode before its call; the task (the
  first ``user`` message of the history, demonstrations left out) a ``user`` ThinkNode first.

A folder is searched recursively for ``*.traj`` (SWE-agent nests runs as
``<run>/<instance>/<instance>.traj``). Episode ids are the file stem (the instance id). A
trajectory does not say whether the task was solved (SWE-bench's evaluation decides that
later): the outcome is ``unknown``; ``meta`` keeps ``exit_status`` and the model.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, Iterator

from scenarios.outcome import OUTCOME_KEY, UNKNOWN
from scenarios.tree import Episode

from scenarios.trace import loads_json

from ._common import EpisodeBuilder, Report, as_text, each_file, load_json, parse_arguments, unique_id

FORMAT = "swe-agent"
SUFFIXES = (".traj",)

#: SWE-agent's own commands (the 1.x editor and submit, the 0.x window editor and search
#: tools): an action line starting with one of them is that tool, anything else a shell line.
COMMANDS = frozenset((
    "str_replace_editor", "submit", "open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert",
    "search_dir", "search_file", "find_file", "filemap", "exit_forfeit", "view_image",
))
#: The 1.x editor's arguments after ``command`` and ``path``, and how many values each takes.
_EDITOR_FLAGS = {"file_text": 1, "old_str": 1, "new_str": 1, "insert_line": 1, "view_range": 2}
#: How SWE-agent's editors say a call was refused (they exit non-zero; the trajectory keeps
#: only the text).
_EDITOR_ERROR = re.compile(
    r"^\s*(No replacement was performed|The path \S.* does not exist|Parameter `\w+` is required"
    r"|Invalid `\w+`|The `view_range` parameter is not allowed|File already exists at"
    r"|The path \S.* is a directory and only|The parent directory \S.* does not exist"
    r"|Your proposed edit has introduced new syntax error)")
_XML_CALL = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|$)", re.S)
_XML_PARAM = re.compile(r"<parameter=([\w.-]+)>(.*?)</parameter>", re.S)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else as_text(value)


def _editor_args(tokens: list[str]) -> dict[str, Any] | None:
    """``str_replace_editor`` arguments from the tokens after its name, or None if they do
    not read as its signature."""
    if not tokens:
        return None
    args: dict[str, Any] = {"command": tokens[0]}
    rest = tokens[1:]
    if rest and not rest[0].startswith("--"):
        args["path"] = rest.pop(0)
    while rest:
        flag = rest.pop(0)
        name = flag[2:] if flag.startswith("--") else None
        if name not in _EDITOR_FLAGS or len(rest) < _EDITOR_FLAGS[name]:
            return None
        values, rest = rest[:_EDITOR_FLAGS[name]], rest[_EDITOR_FLAGS[name]:]
        if name == "view_range":
            try:
                args[name] = [int(v) for v in values]
            except ValueError:
                return None
        elif name == "insert_line":
            args[name] = int(values[0]) if values[0].lstrip("-").isdigit() else values[0]
        else:
            args[name] = values[0]
    return args


def parse_action(action: str) -> tuple[str, dict[str, Any]]:
    """The call an action line stands for: (tool, arguments)."""
    line = action.strip()
    head = line.split(None, 1)
    name = head[0] if head else ""
    if name not in COMMANDS:
        return "bash", {"command": line}
    rest = head[1] if len(head) > 1 else ""
    if name == "str_replace_editor":
        try:
            args = _editor_args(shlex.split(rest))
        except ValueError:  # unbalanced quotes
            args = None
        if args is not None:
            return name, args
    # The rest of the line is the command's own text (an edit's line range and new code): kept
    # under ``command``, one of the keys compared as code, never as prose to be reworded.
    return name, ({"command": rest} if rest else {})


def _xml_call(response: str) -> tuple[str, dict[str, Any]] | None:
    m = _XML_CALL.search(response)
    if m is None:
        return None
    body = m.group(2)
    # Searched up to the last closing tag only: past it no parameter closes, and a lazy search
    # from each of many unclosed tags (a hostile trace) would take quadratic time.
    params = {k: v.strip("\n") for k, v in _XML_PARAM.findall(body, 0, body.rfind("</parameter>") + len("</parameter>"))}
    if m.group(1) == "str_replace_editor" and isinstance(params.get("view_range"), str):
        nums = re.findall(r"-?\d+", params["view_range"])
        if len(nums) == 2:
            params["view_range"] = [int(n) for n in nums]
    return m.group(1), params


def _issued_calls(history: list[Any]) -> list[tuple[str, Any]]:
    """``(action, tool_calls)`` of the model's own messages, in order (demonstrations and
    other agents' messages left out)."""
    out = []
    for msg in history:
        if (isinstance(msg, dict) and msg.get("role") == "assistant" and not msg.get("is_demo")
                and msg.get("agent", "main") == "main" and isinstance(msg.get("action"), str)):
            out.append((msg["action"], msg.get("tool_calls")))
    return out


def _task(history: list[Any]) -> str | None:
    for msg in history:
        if isinstance(msg, dict) and msg.get("role") == "user" and not msg.get("is_demo"):
            return _text(msg.get("content"))
    return None


def _model(data: dict[str, Any]) -> str | None:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = loads_json(config)
        except ValueError:
            return None
    try:
        name = config["agent"]["model"]["name"]
    except (KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None


def _run(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    data = load_json(path, report)
    if data is None:
        return
    steps = data.get("trajectory") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        report(f"{path}: expected an object with a 'trajectory' list, skipped")
        return
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    meta: dict[str, Any] = {OUTCOME_KEY: UNKNOWN}
    if isinstance(info.get("exit_status"), str):
        meta["exit_status"] = info["exit_status"]
    model = _model(data)
    if model is not None:
        meta["model"] = model
    b = EpisodeBuilder(unique_id(seen, path.stem), FORMAT, path, **meta)
    history = data.get("history") if isinstance(data.get("history"), list) else []
    task = _task(history)
    if task:
        b.message("user", task)
    issued = _issued_calls(history)
    cursor = 0
    for k, step in enumerate(steps):
        where = f"{path}: trajectory[{k}]"
        if not isinstance(step, dict):
            report(f"{where}: a step must be an object, skipped")
            continue
        action = step.get("action")
        if not isinstance(action, str):
            report(f"{where}: a step without an 'action' string, skipped")
            continue
        if not action.strip():
            continue  # an auto-submission: no call was made
        call: tuple[str, dict[str, Any]] | None = None
        call_id = None
        # function calling: the message that issued this action holds the model's own call
        j = next((i for i in range(cursor, len(issued)) if issued[i][0] == action), None)
        if j is not None:
            cursor = j + 1
            tool_calls = issued[j][1]
            if isinstance(tool_calls, list) and tool_calls and isinstance(tool_calls[0], dict):
                fn = tool_calls[0].get("function")
                if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                    call = fn["name"], parse_arguments(fn.get("arguments"), report, where)
                    call_id = tool_calls[0].get("id") if isinstance(tool_calls[0].get("id"), str) else None
        if call is None and isinstance(step.get("response"), str):
            call = _xml_call(step["response"])
        if call is None:
            call = parse_action(action)
        thought = step.get("thought")
        if isinstance(thought, str) and thought.strip():
            b.message("assistant", thought)
        node = b.call(call[0], call[1], call_id, turn=k)
        observation = _text(step.get("observation"))
        refused = call[0] in ("str_replace_editor", "edit", "create", "insert") and bool(_EDITOR_ERROR.match(observation))
        b.result(node, observation, error=refused)
    yield b.ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    return each_file(path, SUFFIXES, _run, problems, recursive=True)
