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
from dataclasses import dataclass
from typing import Any, Callable, Mapping

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


# ``<<EOF``, ``<<-'EOF'``, ``<< "PY"`` (not ``<<<``, a here-string, which is one word).
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2")
# Commands that read nothing of the world and write nothing: a line made of them and of commands
# already run repeats those (``echo '--- run ---' && python t.py``).
_INERT = re.compile(r"(echo|printf|true|:|pwd|set|export|unset|sleep|clear|source\s+\S*activate)(\s|$)")
# Commands that move the shell to another directory: what follows them reads other files.
_MOVES = re.compile(r"(cd|pushd|popd)(\s|$)")
# A compound command (a loop, a condition, a function) is not split: its parts are not commands.
_COMPOUND = re.compile(r"(for|while|until|if|case|select|do|then|else|elif|fi|done|esac|function)(\s|;|$)|\w+\s*\(\)")
# What ends a quote: the closing single quote; in double quotes an escape or the closing quote.
_SQ_END = re.compile(r"'")
_DQ_END = re.compile(r'\\.|"', re.S)
# The characters that can end an ordinary run: quotes, escapes, comments, groups, here-documents,
# separators.
_SPECIAL = re.compile(r"[\\'\"#(){}<\n;&|]")
#: A line longer than this is not split: a part is compared as a whole text, and a very long
#: line (a generated script) is no re-run of an earlier command worth the time.
MAX_LINE = 20_000


def command_parts(text: str) -> tuple[str, ...] | None:
    """A shell line's commands in the order they run, split at the top-level ``&&``, ``||``,
    ``;``, ``&`` and line breaks; quotes, parentheses, braces and here-documents stay with
    their command (``python - <<'PY' ... PY`` is one command, its script included). Each part
    is stripped; comments are dropped. None when the line does not parse (an unclosed quote or
    here-document), holds a compound command (``for``, ``if``, ``case``, a function) or is
    longer than ``MAX_LINE``: then its parts are unknown.

    >>> command_parts("cd /r && nl -ba a.py | sed -n '1,5p'; echo 'x && y'")
    ('cd /r', "nl -ba a.py | sed -n '1,5p'", "echo 'x && y'")
    """
    if len(text) > MAX_LINE:
        return None
    parts: list[str] = []
    cur: list[str] = []
    pending: list[tuple[str, bool]] = []  # here-documents opened on this line: (terminator, tabs stripped)
    quote = None
    depth = 0
    i, n = 0, len(text)

    def flush() -> None:
        part = "".join(cur).strip()
        if part:
            parts.append(part)
        cur.clear()

    while i < n:
        if quote is not None:  # jump to the quote's end (past escapes inside double quotes)
            m = (_SQ_END if quote == "'" else _DQ_END).search(text, i)
            if m is None:
                return None
            cur.append(text[i:m.end()])
            i = m.end()
            if text[m.end() - 1] == quote and (quote == "'" or m.group(0) == '"'):
                quote = None
            continue
        m = _SPECIAL.search(text, i)  # ordinary characters are taken in one run
        if m is None:
            cur.append(text[i:])
            break
        if m.start() > i:
            cur.append(text[i:m.start()])
            i = m.start()
        c = text[i]
        if c == "\\" and i + 1 < n:
            cur.append(text[i:i + 2])
            i += 2
            continue
        if c in "'\"":
            quote = c
        elif c == "#" and (not cur or cur[-1][-1:] in (" ", "\t", ";", "&", "|", "(")):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "({":
            depth += 1
        elif c in ")}":
            depth = max(0, depth - 1)
        elif c == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
            m = _HEREDOC.match(text, i)
            if m:
                pending.append((m.group(3), m.group(1) == "-"))
                cur.append(m.group(0))
                i = m.end()
                continue
        elif c == "\n":
            cur.append(c)
            i += 1
            while pending:  # the here-documents' bodies follow this line break, in order
                end, tabs = pending.pop(0)
                while True:
                    if i >= n:
                        return None
                    stop = text.find("\n", i)
                    line = text[i:] if stop < 0 else text[i:stop]
                    cur.append(line + "\n")
                    i = n if stop < 0 else stop + 1
                    if (line.lstrip("\t") if tabs else line).rstrip() == end:
                        break
            if depth == 0:
                flush()
            continue
        elif depth == 0 and (text.startswith("&&", i) or text.startswith("||", i)):
            flush()
            i += 2
            continue
        elif depth == 0 and c == ";" and not text.startswith(";;", i):
            flush()
            i += 1
            continue
        elif (depth == 0 and c == "&" and not text.startswith("&>", i)
              and (not cur or cur[-1][-1:] not in (">", "<"))):
            flush()  # a command sent to the background: the next one starts
            i += 1
            continue
        cur.append(c)
        i += 1
    if quote is not None or pending:
        return None
    flush()
    if any(_COMPOUND.match(part) for part in parts):
        return None
    return tuple(parts)


def inert(part: str) -> bool:
    """True for a command that neither reads the world nor writes it (``echo``, ``set -e``)."""
    return bool(_INERT.match(part)) and not writes(part)


def moves(part: str) -> bool:
    """True for a command that changes the shell's directory (``cd``, ``pushd``, ``popd``)."""
    return bool(_MOVES.match(part))


#: Arguments whose text is a shell line (a program text under ``code`` is no shell line).
SHELL_KEYS = frozenset(("command", "cmd", "commands", "bash", "shell"))


def shell_line(args: Any) -> str | None:
    """The shell line a shell tool's call carries: its one string argument named as a shell
    line is (``command``, ``cmd`` ...); None when it has none, or several."""
    if not isinstance(args, Mapping):
        return None
    lines = [v for k, v in args.items() if isinstance(v, str) and str(k).lower() in SHELL_KEYS]
    return lines[0] if len(lines) == 1 else None


@dataclass(frozen=True, slots=True)
class Command:
    """One command of a shell line, as ``progress_guard(shell_parts=True)`` and ``loopbench
    label`` compare it."""

    key: str  # its text in ``form``, after the directories its line moved to before it
    writes: bool
    idle: bool  # reads nothing of the world: ``echo``, ``set -e``, or a move (``cd``)
    moves: bool


def line_commands(text: str, form: Callable[[str], str] = cosmetic_form) -> tuple[Command, ...] | None:
    """The commands of a shell line (:func:`command_parts`), each keyed by its text in ``form``
    and the directories the line moved to before it: ``cd a && ls`` and ``cd b && ls`` run two
    commands. None when the line's parts are unknown."""
    parts = command_parts(text)
    if not parts:
        return None
    out, where = [], ""
    for part in parts:
        key = form(part)
        move = moves(part)
        if move:
            where += "\x00" + key
        out.append(Command(where + "\x01" + key, writes(part), move or inert(part), move))
    return tuple(out)


# An environment assignment before a command (``PYTHONPATH=. python t.py``).
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")


def program_of(line: str) -> str | None:
    """The program a shell line's last command runs (``python`` for ``cd /r && python -m
    pytest -q``, ``grep`` for ``grep -rn x . | head``); None when the line's commands are not
    known or it runs none but ``cd``, ``echo`` and the like."""
    parts = command_parts(line)
    for part in reversed(parts or ()):
        if moves(part) or inert(part):
            continue
        words = [w for w in part.split() if not _ASSIGNMENT.match(w)]
        return words[0] if words else None
    return None


def run_after_writes(commands: tuple[Command, ...]) -> list[Command]:
    """The commands of a line that ran after its last write, less the idle ones: what the line
    showed of the world as it is once the line is done."""
    last = max((i for i, c in enumerate(commands) if c.writes), default=-1)
    return [c for c in commands[last + 1:] if not c.idle]
