"""Which files a shell line reads and which it writes, when the line names them.

A coding agent does everything through one shell: it writes a reproduction script, runs it,
reads the source, edits it. Taken as "some write happened", writing ``reproduce_issue.py``
makes every file the agent read before look changed, and the same ``cat models.py`` read again
after it looks like a re-read of an edited file. Most writes name their files: a redirection,
``tee``, ``sed -i``, ``rm``, ``touch``, ``mkdir``, ``cp``, ``mv``. :func:`written_paths` gives
those files, and None as soon as one write of the line does not name its files (``git
checkout``, ``patch``, ``pip install``, a program it does not know, a script whose text writes
files); a known program run (``python t.py``) writes nothing, as the same line alone does.
:func:`read_paths` gives the files a line that only reads named files reads (``cat``, ``nl``,
``sed -n``, ``head``, ``grep`` ...), and None for any other line. A directory is no file it
names: a listing (``ls``, ``find``, ``grep -r``) changes when any program runs (Python writes
``__pycache__``, a test run its cache), so a line that reads one is left to the older reading,
that any write may have changed it.

Paths are compared by :func:`overlaps`, which cannot know the directory a relative path
was meant from: it takes two paths for the same file when one's components appear in a row
in the other's (``x.py`` and ``/testbed/pkg/x.py``; a directory and the files under it). That
errs towards "changed", as :mod:`detectors.commands` does: a read taken for changed only lets
one re-read through, a write missed makes a re-read of an edited file look like a loop.

>>> written_paths("cat > reproduce_issue.py <<'EOF'\\nprint(1)\\nEOF\\npython reproduce_issue.py")
('reproduce_issue.py',)
>>> written_paths("sed -i 's/a/b/' django/db/models/base.py && git diff")
('django/db/models/base.py',)
>>> written_paths("git checkout django/db/models/base.py") is None
True
>>> read_paths("nl -ba django/db/models/base.py | sed -n '120,160p'")
('django/db/models/base.py',)
>>> read_paths("python reproduce_issue.py") is None
True
>>> overlaps("/testbed/django/db/models/base.py", "django/db/models/base.py")
True
>>> overlaps("django/db/models/base.py", "reproduce_issue.py")
False
"""
from __future__ import annotations

import posixpath
import re
import shlex

from .commands import command_parts, inert, moves, writes

# A here-document's marker in a command (not a here-string, ``<<<``): the command is the text
# before its body.
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
# Redirections shlex (``punctuation_chars``) gives as tokens: ``>``, ``>>``, ``&>``, ``>|``,
# ``<``; ``>&`` and ``<&`` are followed by a descriptor or a file.
_OUT = frozenset((">", ">>", "&>", ">|", "&>>", ">>|"))
_IN = frozenset(("<",))
_DUP = frozenset((">&", "<&"))
# Text that makes a path unknowable (variables, substitutions, home, brace expansion) or a glob.
_UNKNOWABLE = re.compile(r"[$`~{}*?\[\]]")
# Text that runs another command inside a word: its effects are not the line's words.
_SUBSTITUTION = re.compile(r"`|\$\(|<\(|>\(")

# Programs that only read the files they name, and the short options of each that take a value
# (``grep -A 5``); the first positional argument of some is no path (a pattern, a sed script).
_READERS: dict[str, str] = {
    "cat": "", "nl": "bvinswdlf", "head": "nc", "tail": "nc", "wc": "", "stat": "cf", "cut": "dfcb",
    "grep": "emABCdD", "egrep": "emABCdD", "fgrep": "emABCdD", "tr": "",
    "sed": "",  # its options and script: ``_sed``
}
_PATTERN_FIRST = frozenset(("grep", "egrep", "fgrep"))
# Options by which a reader reads more than its operands (``grep -f pats``, ``tail -f``) or
# something other than files (``grep -r`` a tree): such a line is no read of named files.
_MORE_THAN_OPERANDS = {"grep": {"f", "--file", "r", "R", "--recursive", "d", "--directories", "--include", "--exclude"},
                       "egrep": {"f", "--file", "r", "R", "--recursive"}, "fgrep": {"f", "--file", "r", "R", "--recursive"},
                       "tail": {"f", "F", "--follow"}}
# A sed script that only prints or deletes lines by number (``10,20p``, ``$p``, ``1,5d;10q``): one
# that matches text, reads (``r``), writes (``w``) or runs (``e``) is not read here.
_SED_LINES = re.compile(r"\s*(?:(?:\d+|\$)(?:\s*,\s*(?:\d+|\$))?\s*[pdq]\s*;?\s*)+")
# Programs that write the files they name (all their operands; ``cp`` only its last).
_NAMED_WRITERS = frozenset(("rm", "rmdir", "touch", "mkdir", "mv", "cp", "tee"))
# Programs run as the line's work (a script, a test run, a listing): like a standalone line of
# theirs (``detectors.commands.writes``), they count as writing nothing the text does not show.
# (Not ``sort``, ``uniq``, ``awk``, ``find``, ``env``: they write through options or scripts, or run
# the command they name.)
_RUNNERS = frozenset(("python", "python2", "python3", "pytest", "py.test", "node", "ruby", "java", "javac", "go",
                      "cargo", "make", "npm", "npx", "yarn", "pnpm", "tox", "nox", "ls", "pwd", "which", "git",
                      "echo", "printf", "true", "false", "test", "[", "sleep", "cd", "export", "set", "diff", "cmp",
                      "file", "jq", "xxd", "od", "du", "df"))


def _components(path: str) -> list[str] | None:
    if _UNKNOWABLE.search(path):
        return None
    # A backslash separates too: a Windows harness's declared paths (``C:\\repo\\a.py``) name the
    # files a shell line or another tool spells with ``/``; splitting more only overlaps more.
    parts = [c for c in posixpath.normpath(path.replace("\\", "/")).split("/") if c not in ("", ".")]
    return None if ".." in parts else parts


def overlaps(a: str, b: str) -> bool:
    """True when paths ``a`` and ``b`` may name the same file, or one a directory holding the
    other: the shorter's components appear in a row in the longer's. A path that cannot be
    read (``$HOME/x``, ``../x``, a glob) or names the working directory overlaps every path."""
    pa, pb = _components(a), _components(b)
    if not pa or not pb:
        return True
    if len(pa) > len(pb):
        pa, pb = pb, pa
    n = len(pa)
    return any(pb[i:i + n] == pa for i in range(len(pb) - n + 1))


def _head_body(part: str) -> tuple[str, str]:
    """A command and its here-document's text ("" when it has none)."""
    head, _, body = part.partition("\n")
    return (head, body) if _HEREDOC.search(head) else (part, "")


def _split(head: str) -> tuple[list[list[str]], list[str], list[str]] | None:
    """A command's pipeline (``head``: the command without its here-document's text): the words of
    each stage, the files it redirects into and from. None when shlex cannot read it (an
    unbalanced quote) or the command holds a subshell."""
    head = _HEREDOC.sub(" ", head)
    try:
        lexer = shlex.shlex(head, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return None
    stages: list[list[str]] = [[]]
    outs: list[str] = []
    ins: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("|", "|&"):
            stages.append([])
        elif tok in _OUT or tok in _IN or tok in _DUP:
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            i += 1
            if tok in _DUP and (target.isdigit() or target == "-"):
                pass  # ``2>&1``: a descriptor, no file
            elif tok in _IN:
                ins.append(target)
            elif target != "/dev/null":
                outs.append(target)
            if stages[-1] and stages[-1][-1].isdigit():
                stages[-1].pop()  # the descriptor of ``2> err.txt``
        elif tok and all(c in "();&|<>" for c in tok):
            return None  # a subshell, a background job or a redirection shlex split oddly
        else:
            stages[-1].append(tok)
        i += 1
    return stages, outs, ins


def _program(words: list[str]) -> tuple[str, list[str]]:
    i = 0
    while i < len(words) and re.match(r"[A-Za-z_]\w*=", words[i]):
        i += 1  # ``PYTHONPATH=. cat x``
    if i == len(words):
        return "", []
    return posixpath.basename(words[i]), words[i + 1:]


def _operands(args: list[str], valued: str) -> tuple[list[str], set[str], list[str]]:
    """The positional arguments, the options (short letters and long names) and the values of
    ``-e`` / ``--expression`` (a sed or grep script given as an option) of a command."""
    out: list[str] = []
    flags: set[str] = set()
    scripts: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            out.extend(args[i + 1:])
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            flags.add(name)
            if name in ("--expression", "--regexp"):
                if not eq and i + 1 < len(args):
                    i += 1
                    value = args[i]
                scripts.append(value)
        elif word.startswith("-") and len(word) > 1 and not word[1:].isdigit():
            for j, ch in enumerate(word[1:], 1):
                flags.add(ch)
                if ch in valued:
                    rest = word[j + 1:]
                    if not rest and i + 1 < len(args):
                        i += 1  # the value is the next word
                        rest = args[i]
                    if ch == "e":
                        scripts.append(rest)
                    break
        elif not (word.startswith("-") and word[1:].isdigit()):  # ``head -20``
            out.append(word)
        i += 1
    return out, flags, scripts


def _sed(args: list[str]) -> tuple[bool, list[str], list[str]]:
    """A sed command's: whether it edits in place, its scripts, its files."""
    ops, flags, scripts = _operands(args, "efl")
    in_place = "i" in flags or "--in-place" in flags
    if not scripts and not ({"f", "--file"} & flags) and ops:
        scripts, ops = [ops[0]], ops[1:]
    return in_place, scripts, ops


def _stage_writes(words: list[str]) -> list[str] | None:
    """The files one pipeline stage writes by its program ([] when it writes none), None when
    it may write something its words do not name."""
    prog, args = _program(words)
    if not prog:
        return []
    if prog == "sed":
        in_place, _, files = _sed(args)
        if not in_place:
            return []
        return files if files and all(_components(f) for f in files) else None
    if prog in _NAMED_WRITERS:
        ops, flags, _ = _operands(args, "mtS" if prog in ("cp", "mv") else "m")
        if "t" in flags or "--target-directory" in flags:
            return None
        maybe_dirs = ops if prog == "mv" or {"r", "R", "--recursive"} & flags else ops[-1:] if prog == "cp" else []
        if any(o.endswith("/") or "." not in posixpath.basename(o) for o in maybe_dirs):
            # a directory: a file read relative to it (``cd pkg && cat m.py`` after ``rm -rf
            # pkg``, or after ``cp x.py pkg/``) names none of its operands
            return None
        return ops[-1:] if prog == "cp" else ops
    if prog in _READERS or prog in _RUNNERS:
        return [] if not writes(" ".join(words)) else None
    return None  # a program not known here (``sort -o``, ``ed``, ``sh -c``, ``xargs rm``, ``vim``)


def written_paths(line: str) -> tuple[str, ...] | None:
    """The files a shell line writes, when every write of it names them: () for a line that
    writes nothing it does not name, None when a write's files are not known. A program run
    (``python t.py``) counts as writing nothing, as the same line alone does; a program this
    module does not know, a substitution, or a here-document whose text would write files when
    run (a script that opens a file for writing), makes the files unknown."""
    parts = command_parts(line)
    if parts is None:
        return None if writes(line) else ()
    out: list[str] = []
    for part in parts:
        if moves(part):
            continue
        head, body = _head_body(part)
        if _SUBSTITUTION.search(head) or (body and writes(body)):
            return None
        split = _split(head)
        if split is None:
            return None
        stages, outs, _ = split
        for words in stages:
            named = _stage_writes(words)
            if named is None:
                return None
            out.extend(named)
        out.extend(outs)
    if any(_components(p) is None for p in out):
        return None
    return tuple(dict.fromkeys(posixpath.normpath(p) for p in out))


def read_paths(line: str) -> tuple[str, ...] | None:
    """The files a shell line reads, when it only runs readers of named files (``cat``, ``nl``,
    ``sed -n '10,20p'``, ``head``, ``grep`` of files ...) and writes nothing; None for any other
    line (one that lists a directory, searches a tree, reads a glob or reads files its options
    name). A stage after a pipe reads its input, not files."""
    parts = command_parts(line)
    if not parts:
        return None
    out: list[str] = []
    for part in parts:
        if moves(part) or inert(part):
            continue
        if writes(part) or "\n" in part or _SUBSTITUTION.search(part):
            return None
        split = _split(part)
        if split is None:
            return None
        stages, outs, ins = split
        if outs:
            return None
        out.extend(ins)
        for n, words in enumerate(stages):
            named = _stage_reads(words, first=n == 0 and not ins)
            if named is None:
                return None
            out.extend(named)
    if not out or any(not _components(p) for p in out):
        return None
    return tuple(dict.fromkeys(posixpath.normpath(p) for p in out))


def _stage_reads(words: list[str], first: bool) -> list[str] | None:
    prog, args = _program(words)
    if prog not in _READERS:
        return None
    if prog == "sed":
        in_place, scripts, ops = _sed(args)
        if in_place or not scripts or not all(_SED_LINES.fullmatch(sc) for sc in scripts):
            return None
        flags: set[str] = set()
    else:
        ops, flags, _ = _operands(args, _READERS[prog])
        if flags & _MORE_THAN_OPERANDS.get(prog, set()):
            return None
        if prog in _PATTERN_FIRST and not ({"e", "--regexp"} & flags):
            ops = ops[1:]
    if prog == "tr":
        return []  # reads its input only
    if not ops:
        return [] if not first else None  # the pipe's input; a first stage reading no file reads stdin
    return ops
