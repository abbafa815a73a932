"""The editor and shell of a multi-tool coding agent: ``str_replace_editor`` and ``execute_bash``.

The tools OpenHands' CodeAct agent and SWE-agent give a model, with their documented
semantics (Anthropic's text-editor tool, as OpenHands' ``openhands-aci`` implements it in
``openhands_aci/editor/editor.py``; its messages are restated here, not its code):
``str_replace_editor(command, path, ...)`` views a file with ``cat -n`` line numbers
(``view_range`` for a slice, a directory lists two levels), ``create``s a file that does not
exist yet, ``str_replace``s an ``old_str`` that must occur exactly once ("No replacement was
performed, old_str `...` did not appear verbatim in PATH." otherwise), ``insert``s
``new_str`` after ``insert_line``, and ``undo_edit`` restores the file as it was before its
last edit. ``execute_bash(command)`` runs a command in the repository, usually as
``cd /workspace/repo && ...``; the commands are those of the ``bash`` persona
(``scenarios.shell``) plus running a script the agent created (``python reproduce.py``).
Paths are absolute under :data:`REPO`, as the agents write them. Nothing is executed:
commands and edits are applied to the per-path ``WorldState`` by fixed rules, and the
facts follow the other tools (a view gains what it shows, an edit gains when the content
changes, a run gains when the tree changed since).
"""
from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Any, Mapping

from detectors.protocol import Observation, ToolCall

from .shell import changed_src, current, run_command
from .worldtools import digest, norm_path

#: Where the repository lives in the agent's sandbox (OpenHands' ``/workspace``).
REPO = "/workspace/repo"
EDITOR, SHELL = "str_replace_editor", "execute_bash"
_CD = re.compile(r"^\s*cd\s+" + re.escape(REPO) + r"/?\s*(&&|;)\s*")


def repo_path(path: str) -> str:
    """``/workspace/repo/src/a.py`` -> ``src/a.py``: the world's name for a file."""
    p = norm_path(path)
    return norm_path(p[len(REPO):].lstrip("/")) if p == REPO or p.startswith(REPO + "/") else p


def abs_path(path: str) -> str:
    return f"{REPO}/{path}"


def _numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(text.split("\n"), start))


def _cat_n(what: str, text: str, start: int = 1) -> str:
    return f"Here's the result of running `cat -n` on {what}:\n{_numbered(text, start)}\n"


def _err(text: str, fact: str, state):
    return Observation(f"ERROR:\n{text}", error=True), frozenset({fact}), state


def run_editor(world, state, args: Mapping[str, Any]):
    """One ``str_replace_editor`` call: (observation, facts, new state)."""
    command, raw = str(args.get("command", "")), str(args.get("path", ""))
    path = repo_path(raw)
    content = current(world, state, path)
    if command == "view":
        if content is None:
            listing = sorted({p for p in world.files if p.startswith(path + "/") or path in (".", "/", "")}
                             | {p for p, _ in state.written if p.startswith(path + "/")})
            if not listing:
                return _err(f"Invalid `path` parameter: {raw}. The path {raw} does not exist. Please provide a valid path.",
                            f"missing:{path}", state)
            text = (f"Here's the files and directories up to 2 levels deep in {raw}, excluding hidden items:\n"
                    + "\n".join(abs_path(p) for p in listing))
            return Observation(text), frozenset({f"dir:{path}:{digest(text)}"}), state
        lo_hi = args.get("view_range")
        if lo_hi:
            lines = content.split("\n")
            lo, hi = int(lo_hi[0]), int(lo_hi[1])
            hi = len(lines) if hi == -1 else min(hi, len(lines))
            if not 1 <= lo <= hi:
                return _err(f"Invalid `view_range` parameter: {list(lo_hi)}. Its first element `{lo}` should be within "
                            f"the range of lines of the file: [1, {len(lines)}].", f"badrange:{path}:{lo}", state)
            shown = "\n".join(lines[lo - 1:hi])
            return Observation(_cat_n(raw, shown, lo)), frozenset({f"shown:{path}:{digest(shown)}"}), state
        return Observation(_cat_n(raw, content)), frozenset({f"shown:{path}:{digest(content)}"}), state

    def write(new: str, text: str):
        if new == content:  # the same text again changes nothing
            return Observation(text), frozenset({f"shown:{path}:{digest(new)}"}), state
        nxt = replace(state, written=state.written + ((path, new),))
        return Observation(text), frozenset({f"edit:{path}:{digest(nxt.written)}"}), nxt

    if command == "create":
        if content is not None:
            return _err(f"Invalid `path` parameter: {raw}. File already exists at: {raw}. Cannot overwrite files using "
                        f"command `create`.", f"exists:{path}", state)
        return write(str(args.get("file_text", "")), f"File created successfully at: {raw}")
    if content is None:
        return _err(f"Invalid `path` parameter: {raw}. The path {raw} does not exist. Please provide a valid path.",
                    f"missing:{path}", state)
    if command == "str_replace":
        old, new = str(args.get("old_str", "")), str(args.get("new_str", ""))
        hits = content.count(old) if old else 0
        if hits == 0:
            return _err(f"No replacement was performed, old_str `{old}` did not appear verbatim in {raw}.",
                        f"nomatch:{path}:{digest(old, content)}", state)
        if hits > 1:
            lines = sorted({content[:m.start()].count("\n") + 1 for m in re.finditer(re.escape(old), content)})
            return _err(f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines {lines}. "
                        f"Please ensure it is unique.", f"multi:{path}:{digest(old, content)}", state)
        edited = content.replace(old, new, 1)
        at = content[:content.index(old)].count("\n")
        lo = max(0, at - 4)
        snippet = "\n".join(edited.split("\n")[lo:at + 5 + new.count("\n")])
        return write(edited, f"The file {raw} has been edited. " + _cat_n(f"a snippet of {raw}", snippet, lo + 1)
                     + "Review the changes and make sure they are as expected. Edit the file again if necessary.")
    if command == "insert":
        lines = content.split("\n")
        at = int(args.get("insert_line", -1))
        if not 0 <= at <= len(lines):
            return _err(f"Invalid `insert_line` parameter: {at}. It should be within the range of lines of the file: "
                        f"[0, {len(lines)}]", f"badline:{path}:{at}", state)
        new = str(args.get("new_str", ""))
        edited = "\n".join(lines[:at] + new.split("\n") + lines[at:])
        snippet = "\n".join(edited.split("\n")[max(0, at - 4):at + 4 + new.count("\n")])
        return write(edited, f"The file {raw} has been edited. "
                     + _cat_n("a snippet of the edited file", snippet, max(0, at - 4) + 1)
                     + "Review the changes and make sure they are as expected (correct indentation, no duplicate "
                       "lines, etc). Edit the file again if necessary.")
    if command == "undo_edit":
        versions = [c for p, c in state.written if p == path]
        if not versions:
            return _err(f"No edit history found for {raw}.", f"nohistory:{path}", state)
        before = versions[-2] if len(versions) > 1 else world.files.get(path, "")
        return write(before, f"Last edit to {raw} undone successfully. " + _cat_n(raw, before))
    return _err(f"Unrecognized command {command}. The allowed commands for the {EDITOR} tool are: view, create, "
                f"str_replace, insert, undo_edit", f"badcmd:{command}", state)


def run_shell(world, state, args: Mapping[str, Any]):
    """One ``execute_bash`` call: the ``bash`` persona's commands, run in :data:`REPO`, plus
    ``python SCRIPT.py`` for a script the agent created (a reproduction: it fails while the
    source is unfixed, each failure naming how many cases still fail)."""
    command = _CD.sub("", str(args.get("command", "")), count=1)
    m = re.fullmatch(r"python3?\s+(\S+\.py)", command.strip())
    if m:
        path = repo_path(m.group(1))
        script = state.file(path)
        if script is None:
            return (Observation(f"python: can't open file '{REPO}/{path}': [Errno 2] No such file or directory", error=True),
                    frozenset({f"missing:{path}"}), state)
        failing = max(0, 4 - changed_src(world, state))
        text = (f"Traceback (most recent call last):\n  File \"{REPO}/{path}\", line 3, in <module>\n"
                f"AssertionError: {failing} of 4 cases still wrong" if failing else "All 4 cases OK")
        return Observation(text, error=bool(failing)), frozenset({f"ran:{path}:{digest(state.written)}"}), state
    return run_command(world, state, command)


def sh(command: str) -> ToolCall:
    """An ``execute_bash`` call running ``command`` in the repository, as the agents write it."""
    return ToolCall(SHELL, {"command": f"cd {REPO} && {command}"})


def view(path: str) -> ToolCall:
    """A ``str_replace_editor`` view of the whole of ``path`` (a file or a directory of the world)."""
    return ToolCall(EDITOR, {"command": "view", "path": abs_path(path)})


def editor_view(world, rng: random.Random) -> ToolCall:
    """A look around the repository through the editor: a file, a slice of one, or a directory."""
    path = rng.choice(sorted(world.files))
    form = rng.randrange(4)
    if form == 0:
        return view(path.split("/")[0])
    if form == 1:
        start = rng.randint(1, 3)
        return ToolCall(EDITOR, {"command": "view", "path": abs_path(path), "view_range": [start, start + rng.randint(1, 4)]})
    return view(path)
