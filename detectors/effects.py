"""Which tool calls write, and what they write: a declared property of a tool, not a guess.

A result-aware guard must know when the world may have changed: re-running a test after an
edit is how an agent learns the edit's effect, re-running it with no edit in between is a
loop. Whether a call wrote is a fact about the tool, documented by whoever made it, so it
is declared here for the tools of the common harnesses, and a harness author declares their
own in the TOML they already write (``[tools.NAME]`` or a detector's
``tool_overrides.NAME``; see docs/detectors.md). A tool nobody declared is left to the
detector's own last resort (``progress_guard``'s tool-name patterns).

A declaration says one of:

- every call writes (``writes=True``) or only reads (``writes=False``);
- an argument selects a sub-command (``command_arg``), some of whose values write
  (``write_commands``) and some only read (``read_commands``): the editor tool of
  OpenHands and SWE-agent, ``str_replace_editor``, views with ``command="view"`` and writes
  with ``create``/``str_replace``/``insert``/``undo_edit``;
- an argument holds a shell command or program text (``shell_args``), which writes when
  :func:`detectors.commands.writes` says so (``sed -i``, redirections, ``git commit``,
  ``pip install`` ...).

``target_args`` name the arguments that say *what* a call acts on (a path, a record id);
``what`` says what kind of thing that is (``file``, ``record``, ``remote``, ``environment``).
A sub-command not in either list counts as a write: a read taken for a write only lets one
re-run through, a write taken for a read makes an edit-then-test cycle look like a loop.

>>> effect_of(ToolCall("str_replace_editor", {"command": "view", "path": "/repo/a.py"}))
Effect(writes=False, target='/repo/a.py', what='file')
>>> effect_of(ToolCall("str_replace_editor", {"command": "str_replace", "path": "/repo/a.py",
...                                           "old_str": "x = 1", "new_str": "x = 2"}))
Effect(writes=True, target='/repo/a.py', what='file')
>>> effect_of(ToolCall("execute_bash", {"command": "sed -i 's/a/b/' setup.cfg"})).writes
True
>>> effect_of(ToolCall("my_tool", {"x": 1})) is None  # undeclared
True
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from .commands import writes as command_writes
from .protocol import ToolCall

#: What a call acts on.
WHATS = ("file", "record", "remote", "environment")

#: The keys a ``[tools.NAME]`` / ``tool_overrides.NAME`` table may use to declare effects.
DECLARATION_KEYS = ("effects", "writes", "command_arg", "write_commands", "read_commands", "shell_args",
                    "target_args", "what")


@dataclass(frozen=True, slots=True)
class Effect:
    """What one call does: whether it writes, and the thing it acts on when the tool names it."""

    writes: bool
    target: str | None = None
    what: str = "file"


@dataclass(frozen=True, slots=True)
class Declaration:
    """How the calls of one tool act on the world (see the module docstring)."""

    writes: bool | None = None
    command_arg: str | None = None
    write_commands: frozenset[str] = frozenset()
    read_commands: frozenset[str] = frozenset()
    shell_args: tuple[str, ...] = ()
    target_args: tuple[str, ...] = ()
    what: str = "file"

    def effect(self, args: Any) -> Effect:
        args = args if isinstance(args, Mapping) else {"_": args}
        target = next((_text(args[k]) for k in self.target_args if args.get(k) not in (None, "")), None)
        if self.command_arg is not None:
            command = _text(args.get(self.command_arg, "")).strip().lower()
            return Effect(command not in self.read_commands, target, self.what)
        if self.shell_args:
            code = "\n".join(_text(args[k]) for k in self.shell_args if args.get(k) is not None)
            return Effect(command_writes(code), target, self.what)
        if self.writes is not None:
            if self.writes and target is None and self.what == "file":
                target = _patch_targets(args)
            return Effect(self.writes, target, self.what)
        return Effect(True, target, self.what)


def _text(value: Any) -> str:
    """An argument as text: a list (Codex's ``shell`` takes ``["bash", "-lc", "..."]``) joined by spaces."""
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.M)


def _patch_targets(args: Mapping) -> str | None:
    """The files a Codex ``apply_patch`` envelope names (``*** Update File: path``), joined by commas."""
    for v in args.values():
        if isinstance(v, str) and "*** " in v:
            found = _PATCH_FILE.findall(v[:100_000])
            if found:
                return ",".join(sorted(set(p.strip() for p in found)))
    return None


def _editor(*paths: str) -> Declaration:
    return Declaration(command_arg="command", read_commands=frozenset({"view"}),
                       write_commands=frozenset({"create", "str_replace", "insert", "undo_edit"}), target_args=paths)


def _write(*paths: str, what: str = "file") -> Declaration:
    return Declaration(writes=True, target_args=paths, what=what)


def _read(*paths: str) -> Declaration:
    return Declaration(writes=False, target_args=paths)


def _shell(*keys: str) -> Declaration:
    return Declaration(shell_args=keys, what="environment")


#: The tools of the common harnesses, from their documentation (tool name -> declaration).
BUILTIN: dict[str, Declaration] = {
    # OpenHands and SWE-agent: the Anthropic-style editor (``str_replace_based_edit_tool`` is
    # its name in Anthropic's own text-editor tool), a shell, an IPython cell, the LLM editor.
    "str_replace_editor": _editor("path"),
    "str_replace_based_edit_tool": _editor("path"),
    "execute_bash": _shell("command"),
    "execute_ipython_cell": _shell("code"),
    # the OpenHands software-agent SDK names the same two tools ``file_editor`` and ``terminal``
    "file_editor": _editor("path"),
    "terminal": _shell("command"),
    "edit_file": _write("path", "file_path", "target_file"),
    # Claude Code
    "Edit": _write("file_path"),
    "MultiEdit": _write("file_path"),
    "Write": _write("file_path"),
    "NotebookEdit": _write("notebook_path"),
    "Read": _read("file_path"),
    "Glob": _read(),
    "Grep": _read(),
    "LS": _read("path"),
    "Bash": _shell("command"),
    # Cline
    "write_to_file": _write("path"),
    "replace_in_file": _write("path"),
    "execute_command": _shell("command"),
    "list_files": _read("path"),
    "search_files": _read("path"),
    "list_code_definition_names": _read("path"),
    # Codex CLI: a patch envelope (its files are the target); its shells: ``shell`` takes argv,
    # ``shell_command`` a command line, the unified ``exec_command`` its line as ``cmd``
    "apply_patch": _write("path"),
    "shell": _shell("command"),
    "shell_command": _shell("command"),
    "exec_command": _shell("cmd"),
    # Gemini CLI
    "replace": _write("file_path"),
    "write_file": _write("file_path", "path"),
    "read_file": _read("file_path", "absolute_path", "path"),
    "read_many_files": _read("paths"),
    "list_directory": _read("path", "dir_path"),
    "search_file_content": _read(),
    "run_shell_command": _shell("command"),
    # Generic shells and code runners
    "bash": _shell("command"),
    "run_code": _shell("code"),
}


class DeclarationError(ValueError):
    """A tool's effects table that cannot be read; the message names the tool and the key."""


def _strings(tool: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise DeclarationError(f"tool {tool!r}: {key} must be a string or a list of strings, got {value!r}")


def declaration_from(tool: str, table: Mapping[str, Any]) -> Declaration | None:
    """The declaration a ``[tools.NAME]`` / ``tool_overrides.NAME`` table makes, or None when it
    declares nothing about effects. ``effects = "str_replace_editor"`` borrows a built-in
    declaration (a harness that renamed the tool); the other keys override its fields."""
    keys = [k for k in DECLARATION_KEYS if k in table]
    if not keys:
        return None
    base = Declaration()
    if "effects" in table:
        name = table["effects"]
        if not isinstance(name, str) or name not in BUILTIN:
            raise DeclarationError(f"tool {tool!r}: effects must name a built-in declaration "
                                   f"({', '.join(sorted(BUILTIN))}), got {name!r}")
        base = BUILTIN[name]
    fields: dict[str, Any] = {}
    if "writes" in table:
        if not isinstance(table["writes"], bool):
            raise DeclarationError(f"tool {tool!r}: writes must be true or false, got {table['writes']!r}")
        fields.update(writes=table["writes"], command_arg=None, shell_args=())
    if "command_arg" in table:
        if not isinstance(table["command_arg"], str):
            raise DeclarationError(f"tool {tool!r}: command_arg must be an argument name, got {table['command_arg']!r}")
        fields.update(command_arg=table["command_arg"], shell_args=())
    for key in ("write_commands", "read_commands"):
        if key in table:
            fields[key] = frozenset(s.lower() for s in _strings(tool, key, table[key]))
    if "shell_args" in table:
        fields.update(shell_args=_strings(tool, "shell_args", table["shell_args"]), command_arg=None)
    if "target_args" in table:
        fields["target_args"] = _strings(tool, "target_args", table["target_args"])
    if "what" in table:
        if table["what"] not in WHATS:
            raise DeclarationError(f"tool {tool!r}: what must be one of {', '.join(WHATS)}, got {table['what']!r}")
        fields["what"] = table["what"]
    decl = replace(base, **fields)
    if (decl.write_commands or decl.read_commands) and decl.command_arg is None:
        raise DeclarationError(f"tool {tool!r}: write_commands / read_commands need command_arg, the argument "
                               f"that holds the command")
    if decl.command_arg is None and not decl.shell_args and decl.writes is None:
        raise DeclarationError(f"tool {tool!r}: declare writes = true/false, command_arg (with write_commands / "
                               f"read_commands) or shell_args")
    return decl


class Effects:
    """The built-in declarations with a harness's own on top (``tool_overrides``-shaped:
    tool name -> table). Tables are read once, here, so a bad one fails when the detector is
    built, not at the first call of that tool."""

    __slots__ = ("_declared",)

    def __init__(self, tool_overrides: Mapping[str, Mapping[str, Any]] | None = None):
        self._declared: dict[str, Declaration] = dict(BUILTIN)
        for tool, table in (tool_overrides or {}).items():
            if isinstance(table, Mapping):
                decl = declaration_from(str(tool), table)
                if decl is not None:
                    self._declared[str(tool)] = decl

    def declared(self, tool: str) -> bool:
        return tool in self._declared

    def is_shell(self, tool: str) -> bool:
        """The tool's calls carry a shell command or program text (``shell_args``)."""
        decl = self._declared.get(tool)
        return decl is not None and bool(decl.shell_args)

    def shell_text(self, call: ToolCall) -> str | None:
        """The command or program text of a shell tool's call (argv joined), None for other tools."""
        decl = self._declared.get(call.tool)
        if decl is None or not decl.shell_args:
            return None
        args = call.args if isinstance(call.args, Mapping) else {"_": call.args}
        return "\n".join(_text(args[k]) for k in decl.shell_args if args.get(k) is not None)

    def of(self, call: ToolCall) -> Effect | None:
        """The call's effect, or None when its tool is not declared."""
        decl = self._declared.get(call.tool)
        return None if decl is None else decl.effect(call.args)


_DEFAULT = Effects()


def effect_of(call: ToolCall, effects: Effects | None = None) -> Effect | None:
    """The effect of ``call`` under the built-in declarations (or ``effects``); None when undeclared."""
    return (effects or _DEFAULT).of(call)
