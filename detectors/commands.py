"""Commands and code as call arguments: what is cosmetic in them, and which of them write.

An agent whose tool is a shell or a code runner reads, edits and tests through one tool,
so the tool name says nothing about whether a call changed the world: the command text
does. ``writes`` recognises the usual ways a command or a snippet changes files or the
environment (in-place edits, redirections, ``git checkout``/``apply``, ``patch``,
moving or deleting files, installing, formatters and fixers run to rewrite files, code that
opens a file for writing or saves a frame). When unsure it leans towards "writes": a read taken for a write only lets one re-run
through, a write taken for a read makes an edit-then-test cycle look like a loop.
"""
from __future__ import annotations

import re

#: Argument names that hold a command or program text rather than prose. The editor tools'
#: old and new text are code too (``str_replace_editor``'s ``old_str``, Claude Code's and Gemini
#: CLI's ``old_string``, SWE-agent's window editor's ``replacement_text`` and ``replace``, a
#: patch): an ``old_str`` re-sent with its indentation fixed is a new call, not a cosmetic
#: repeat or a rewording.
CODE_KEYS = frozenset(("code", "script", "command", "cmd", "commands", "source", "program", "shell", "bash", "python",
                       "old_str", "new_str", "file_text", "old_string", "new_string", "replacement_text", "replace",
                       "patch", "diff"))

_SHELL_WRITES = (
    r"\bsed\s+(-\w+\s+)*-i",  # in-place edit
    # -i, -pi, -i.bak, before or after the script ("-Mlib" is no -i)
    r"\bperl\b[^|&\n]*\s-[a-zA-Z0-9]*i\.?\w*(?=\s|$)",
    # redirection into a file: the target looks like a path (so "x > 95" in code is not one)
    r"(^|[^\d&<>=-])>>?\s*(?!/dev/null)[\"']?[\w~$-]*[./][\w./~$-]*",
    r"\btee\b",
    r"\bgit\s+(checkout|apply|reset|commit|stash|am|cherry-pick|revert|merge|rebase|restore|switch|add|rm|mv|clean|pull|clone|init)\b",
    r"\bpatch\b",
    r"(^|[;&|(]\s*|\s)(mv|cp|rm|rmdir|mkdir|touch|chmod|chown|ln|truncate|unzip|install|dd)\s",
    r"\b(pip3?|npm|yarn|pnpm|apt-get|apt|conda|brew|cargo|go)\s+(install|add|get|i)\b",
    r"\btar\s+-?\w*x",
    r"\b(curl|wget)\b[^|;&]*\s-(o|O|-output)\b",
    # formatters and fixers rewrite the files they are given (a build re-run after one is a re-test)
    r"\bspotless(Apply|:apply)\b",
    r"(^\s*|[;&|(]\s*|(^|\s)(-m|run|exec|npx|uvx)\s+)(black|isort|autopep8|yapf|autoflake|rustfmt|cargo\s+fmt)(?=\s|$)"
    r"(?![^|;&]*--(check|diff)\b)",
    r"\bruff\s+format\b(?![^|;&]*--(check|diff)\b)",
    r"\b(ruff|eslint|stylelint|rubocop|golangci-lint)\b[^|;&]*\s(--fix|-a|--autocorrect)\b",
    r"\bprettier\b[^|;&]*\s(--write|-w)\b",
    r"\b(gofmt|goimports|clang-format)\b[^|;&]*\s-[wi]\b",
    r"\b(npm|yarn|pnpm)\s+run\s+(format|fmt|fix|lint:fix)\b",
    r"\bmake\s+(format|fmt)\b",
)
_CODE_WRITES = (
    r"\bopen\([^)]*['\"][^'\"]*[wax][^'\"]*['\"]",  # open(..., "w")
    r"\.write(lines)?\(",
    r"\.(to_csv|to_excel|to_json|to_parquet|to_pickle|to_sql|savefig|save|dump|write_text|write_bytes)\(",
    r"\b(json|pickle|yaml|np|numpy|torch)\.(dump|save)\w*\(",
    r"\bos\.(remove|rename|replace|makedirs|mkdir|unlink|rmdir|system|chmod)\(",
    r"\bshutil\.\w+\(",
    r"\bsubprocess\.\w+\(",
    r"\brequests\.(post|put|patch|delete)\(",
    r"\b(Path|path)\([^)]*\)\.(write_\w+|unlink|mkdir|rename|touch)\(",
    r"\.(unlink|mkdir|touch|rename)\(",
)
_WRITES = re.compile("|".join(f"(?:{p})" for p in _SHELL_WRITES + _CODE_WRITES), re.M)
_COMMENT_LINE = re.compile(r"^\s*(#|//|--\s)")


def writes(text: str) -> bool:
    """True when a command or snippet visibly changes files or the environment."""
    return bool(_WRITES.search(text[:20_000]))


def cosmetic_form(text: str) -> str:
    """A command or snippet with its cosmetic differences removed: trailing spaces, blank
    lines and comment-only lines. Indentation is kept (in Python it is meaning: a snippet
    indented as a whole fails), and so is case."""
    lines = [line.rstrip() for line in text[:100_000].replace("\r\n", "\n").split("\n")]
    return "\n".join(line for line in lines if line.strip() and not _COMMENT_LINE.match(line))
