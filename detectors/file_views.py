"""Which lines of which file a call shows: what a guard needs to know that a view brings
nothing the agent has not already been shown.

Coding agents read files in slices: an editor's ``view`` with a ``view_range``, Claude Code's
``Read`` with ``offset`` and ``limit``, or a shell line such as ``nl -ba f.py | sed -n
'120,160p'``. A slice whose lines were all shown before, and whose file nothing has written
since, is the labelling rubric's drift: one parameter nudged, nothing new. Whether it is can
be told before the call runs, from its range and the line numbers earlier results showed.

:func:`view_of` reads a call as a :class:`View` (its file and, when the call names one, its
range); :func:`shown_lines` reads the line numbers a view's result showed: from the result's
line-number gutter when it has one (``cat -n``, ``nl``, an editor's view, ``Read``; an
abbreviated view shows only some numbers), else counted from the range's first line.
Only whole, simple views are read: a shell line that does anything else (runs a script,
chains another command) is not a view.

>>> v = view_of(ToolCall("bash", {"command": "nl -ba src/a.py | sed -n '120,160p'"}), Effects())
>>> v
View(path='src/a.py', first=120, last=160, numbered=True, gutter=True)
>>> shown_lines(v, "   120\\tdef f():\\n   121\\t    return 1")
[120, 121]
>>> view_of(ToolCall("str_replace_editor", {"command": "view", "path": "/t/a.py", "view_range": [5, 9]}), Effects())
View(path='/t/a.py', first=5, last=9, numbered=True, gutter=True)
>>> view_of(ToolCall("bash", {"command": "python a.py"}), Effects()) is None
True
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Mapping

from .effects import Effects
from .protocol import ToolCall

#: The longest range judged line by line (a view of more is judged by the other layers).
MAX_RANGE = 5000


@dataclass(frozen=True, slots=True)
class View:
    """A call that shows a file's lines: ``first``..``last`` when the call names its range
    (known before it runs), ``None`` for the whole file; ``numbered`` when the result carries
    the line numbers."""

    path: str
    first: int | None
    last: int | None
    numbered: bool
    gutter: bool = True  # the numbers shown are the file's (not ``nl``'s count of a slice)


_PATH = r"(?P<path>[^\s|;&<>'\"`$()]+)"
_RANGE = r"""(?P<q>['"]?)(?P<a>\d+),(?P<b>\d+)p(?P=q)"""
_NUMBERED = r"(?:nl\s+-ba|nl\s+-b\s+a|cat\s+-n)"
_RANGE2 = _RANGE.replace("q>", "q2>").replace("=q)", "=q2)").replace("<a>", "<c>").replace("<b>", "<d>")
_SHELL_VIEWS = tuple(re.compile(p) for p in (
    rf"{_NUMBERED}\s+{_PATH}(?:\s*\|\s*sed\s+-n\s+{_RANGE})?",
    # a slice of a slice: ``sed -n '1,220p' f | sed -n '140,170p'`` shows lines 140-170 (an
    # ``nl`` between numbers the slice from 1, not the file)
    rf"sed\s+-n\s+{_RANGE}\s+{_PATH}\s*\|\s*(?P<nl>(?:nl\s+-ba(?:\s+-v\s*1)?|cat\s+-n)\s*\|\s*)?sed\s+-n\s+{_RANGE2}",
    rf"{_NUMBERED}\s+{_PATH}\s*\|\s*head\s+(?:-n\s*)?-?(?P<n>\d+)",
    rf"sed\s+-n\s+{_RANGE}\s+{_PATH}",
    rf"head\s+(?:-n\s*)?-?(?P<n>\d+)\s+{_PATH}",
    rf"cat\s+{_PATH}",
))
_CD = re.compile(r"^\s*cd\s+(?P<dir>[^\s;&|]+)\s*&&\s*")
# a numbered line: "  12<tab>" (cat -n, nl, an editor's view), "  12→" (Read), "  12 " (SWE-agent's
# abbreviated view of a large file)
_GUTTER = re.compile(r"^\s*(\d+)(?:\t|→| )")
_OUTPUT = re.compile(r"<output>\n?(.*?)(?:</output>|\Z)", re.S)
_HEAD = re.compile(r"<output_head>\n?(.*?)</output_head>", re.S)


def _shell_view(text: str) -> View | None:
    text = text.strip()
    if text.startswith(("bash -lc ", "bash -c ", "sh -c ")):
        text = text.split(" ", 2)[2].strip()
        if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
    cd = _CD.match(text)
    if cd:
        text = text[cd.end():]
    text = text.strip().rstrip(";").strip()
    for pattern in _SHELL_VIEWS:
        m = pattern.fullmatch(text)
        if m is None:
            continue
        path = m.group("path")
        if cd and not path.startswith("/"):
            path = posixpath.join(cd.group("dir"), path)
        groups = m.groupdict()
        numbered = text.startswith(("nl", "cat -n"))
        gutter = True
        if groups.get("c"):
            a, b, c, d = (int(groups[k]) for k in "abcd")
            first, last = a + c - 1, min(b, a + d - 1)
            numbered, gutter = bool(groups.get("nl")), False
        elif groups.get("a"):
            first, last = int(groups["a"]), int(groups["b"])
        elif groups.get("n"):
            first, last = 1, int(groups["n"])
        else:
            first = last = None
        if first is not None and (first < 1 or last < first):
            return None
        return View(posixpath.normpath(path), first, last, numbered, gutter)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def view_of(call: ToolCall, effects: Effects) -> View | None:
    """The file and lines ``call`` shows, or None when it is no plain view of a file."""
    args = call.args if isinstance(call.args, Mapping) else {}
    shell = effects.shell_text(call)
    if shell is not None:
        return _shell_view(shell)
    effect = effects.of(call)
    if effect is None or effect.writes or effect.what != "file" or not effect.target or "," in effect.target:
        return None
    path = posixpath.normpath(effect.target)
    rng = args.get("view_range")
    if isinstance(rng, (list, tuple)) and len(rng) == 2:
        a, b = _int(rng[0]), _int(rng[1])
        if a is not None and b is not None and 1 <= a <= b:
            return View(path, a, b, True)
        return None  # to the end (-1) or malformed: its last line is not known
    offset, limit = _int(args.get("offset")), _int(args.get("limit"))
    if call.tool == "Read" and offset is not None and limit is not None and offset >= 1 and limit >= 1:
        return View(path, offset, offset + limit - 1, True)
    if any(args.get(k) is not None for k in ("view_range", "offset", "limit", "start_line", "end_line")):
        return None
    return View(path, None, None, True)


_CUT = re.compile(r"too (?:long|large)|truncat|abbreviat|elided|clipped|omitted", re.I)


def file_end(view: View, text: str, shown: list[int]) -> int | None:
    """The file's last line, when this view's result shows it: a range that ran past the end,
    or a whole file shown uncut; None when the result does not tell."""
    if not shown or _CUT.search(text[:400]) or _CUT.search(text[-400:]):
        return None
    if view.first is None:
        return max(shown) if view.numbered else None
    return max(shown) if max(shown) < view.last else None


def written_files(call: ToolCall, effects: Effects) -> tuple[str, ...] | None:
    """The files a write names, as views name them; None when they are not known (a shell line,
    an undeclared tool): then any file may have changed."""
    if effects.is_shell(call.tool):
        return None
    effect = effects.of(call)
    if effect is None or effect.what != "file" or not effect.target:
        return None
    return tuple(posixpath.normpath(t.strip()) for t in effect.target.split(","))


def shown_lines(view: View, text: str) -> list[int]:
    """The line numbers of ``view``'s file that its result ``text`` showed."""
    m = _OUTPUT.search(text) if text.startswith("<returncode>") else None
    head = _HEAD.search(text) if m is None and text.startswith("<returncode>") else None
    if m is not None:  # mini-swe-agent's wrapper around a command's output
        text = m.group(1)
    elif head is not None:
        # mini-swe-agent cut a long output to its head and tail: the head is the view's first
        # lines (its last one may be cut mid-line, so it does not count); where the tail
        # starts is not told.
        text = head.group(1).rstrip("\n").rsplit("\n", 1)[0]
        if not text:
            return []
    lines = text.replace("\r\n", "\n").split("\n")
    numbered = [int(g.group(1)) for line in lines if (g := _GUTTER.match(line))]
    if numbered and not view.gutter:  # numbered from the slice's first line
        return list(range(view.first, min(view.last, view.first + len(numbered) - 1) + 1))
    if numbered:
        if view.first is not None:
            numbered = [n for n in numbered if view.first <= n <= view.last]
        return numbered
    if view.numbered:
        return []  # a numbered view that shows no numbers: an error text, nothing of the file
    if lines and lines[-1] == "":
        lines.pop()
    first = view.first or 1
    last = first + len(lines) - 1
    if view.last is not None:
        last = min(last, view.last)
    return list(range(first, last + 1))
