"""The ``bash`` tool: one command tool that reads, edits and tests the world's files.

Coding agents whose only tool is a shell read with ``cat``/``sed -n``/``grep``, edit with
``sed -i``, ``cat > f <<EOF``, ``python - <<EOF`` scripts or ``git checkout``, and test
with ``pytest``; the state change is visible only in the command text. Commands are
parsed by fixed rules and never executed. Facts follow the other tools: a read gains what
it shows, an edit gains when the file's content really changes, a test run gains when
the tree changed since the last run of that target.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import replace

from detectors.protocol import Observation

from .worldtools import digest, norm_path, run_snippet

_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_SED_SUB = re.compile(r"^s(.)(.*?)\1(.*?)\1g?$")


def current(world, state, path: str) -> str | None:
    content = state.file(path)
    return content if content is not None else world.files.get(path)


def changed_src(world, state) -> int:
    """Source files whose content differs from the original: what fixes failing tests."""
    latest = {}
    for p, c in state.written:
        latest[p] = c
    return sum(1 for p, c in latest.items() if p.startswith("src/") and world.files.get(p) != c)


def _out(text: str, error: bool = False) -> Observation:
    return Observation(text, error=error)


def run_command(world, state, command: str):
    head, _, body = command.partition("\n")
    heredoc = _HEREDOC.search(head)
    if heredoc:
        end = heredoc.group(1)
        lines = body.split("\n")
        body = "\n".join(lines[:lines.index(end)] if end in lines else lines)
        head = head[:heredoc.start()].strip()
    try:
        argv = shlex.split(head)
    except ValueError as exc:
        return _out(f"bash: syntax error: {exc}", True), frozenset({f"sh:syntax:{digest(head)}"}), state
    if not argv:
        return _out("", False), frozenset({"sh:empty"}), state
    prog = argv[0]

    def write(path: str, content: str):
        path = norm_path(path)
        if current(world, state, path) == content:  # an edit that changes nothing gains nothing
            return _out(""), frozenset({f"shown:{path}:{digest(content)}"}), state
        new = replace(state, written=state.written + ((path, content),))
        return _out(""), frozenset({f"edit:{path}:{digest(new.written)}"}), new

    def show(path: str, text: str):
        return _out(text), frozenset({f"shown:{norm_path(path)}:{digest(text)}"}), state

    def missing(path: str):
        return _out(f"{prog}: {path}: No such file or directory", True), frozenset({f"missing:{norm_path(path)}"}), state

    if prog == "cat" and len(argv) == 3 and argv[1] == ">" and heredoc:
        return write(argv[2], body)
    if prog == "cat" and len(argv) == 2:
        content = current(world, state, norm_path(argv[1]))
        return missing(argv[1]) if content is None else show(argv[1], content)
    if prog == "sed" and len(argv) == 4 and argv[1] == "-n":
        m = re.fullmatch(r"(\d+),(\d+)p", argv[2])
        content = current(world, state, norm_path(argv[3]))
        if content is None:
            return missing(argv[3])
        if not m:
            return _out(f"sed: -e expression #1: unknown command: {argv[2]!r}", True), frozenset({"sh:sed:bad"}), state
        lines = content.split("\n")[int(m.group(1)) - 1:int(m.group(2))]
        return show(argv[3], "\n".join(lines))
    if prog == "sed" and len(argv) == 4 and argv[1] == "-i":
        m = _SED_SUB.match(argv[2])
        content = current(world, state, norm_path(argv[3]))
        if content is None:
            return missing(argv[3])
        if not m:
            return _out(f"sed: -e expression #1: unknown command: {argv[2]!r}", True), frozenset({"sh:sed:bad"}), state
        return write(argv[3], content.replace(m.group(2), m.group(3)))
    if prog == "grep" and len(argv) == 4 and argv[1] == "-n":
        content = current(world, state, norm_path(argv[3]))
        if content is None:
            return missing(argv[3])
        hits = [f"{i}:{line}" for i, line in enumerate(content.split("\n"), 1) if argv[2] in line]
        return show(argv[3], "\n".join(hits)) if hits else (_out("", True), frozenset({f"nogrep:{argv[2]}:{digest(content)}"}), state)
    if prog == "ls":
        path = norm_path(argv[1] if len(argv) > 1 else ".")
        names = sorted({p for p in world.files if path == "." or p.startswith(path + "/")} | {p for p, _ in state.written})
        if not names:
            return missing(path)
        listing = "\n".join(names)
        return _out(listing), frozenset({f"dir:{path}:{digest(listing)}"}), state
    if prog == "git" and len(argv) >= 3 and argv[1] == "checkout":
        path = norm_path(argv[-1])
        original = world.files.get(path)
        if original is None:
            return _out(f"error: pathspec '{argv[-1]}' did not match any file(s) known to git", True), frozenset({f"missing:{path}"}), state
        res = write(path, original)
        return (_out("Updated 1 path from the index"), res[1], res[2]) if res[2] is not state else (_out(""), res[1], state)
    if prog == "git" and argv[1:] == ["diff"]:
        latest = dict(state.written)
        text = "\n".join(f"diff --git a/{p} b/{p}" for p in sorted(latest) if world.files.get(p) != latest[p])
        return _out(text), frozenset({f"diff:{digest(text)}"}), state
    if prog in ("python", "python3") and argv[1:] == ["-"] and heredoc:
        target = re.search(r"open\(['\"]([^'\"]+)['\"],\s*['\"]w['\"]\)|Path\(['\"]([^'\"]+)['\"]\)\.write_text", body)
        if target:  # a script that rewrites a file: the edit is its effect
            path = target.group(1) or target.group(2)
            content = current(world, state, norm_path(path))
            if content is None:
                return missing(path)
            return write(path, content + f"\n# patched {digest(body)}")
        try:
            return _out(run_snippet(body)), frozenset({f"ran:{digest(body.strip())}"}), state
        except ValueError as exc:
            return _out(f"Traceback (most recent call last):\n{exc}", True), frozenset({f"ran:{digest(body.strip())}"}), state
    if prog == "pytest" or argv[:3] == ["python", "-m", "pytest"]:
        rest = argv[1:] if prog == "pytest" else argv[3:]
        target = norm_path(next((a for a in rest if not a.startswith("-")), "tests"))
        fixed = changed_src(world, state)
        failing = max(0, 4 - fixed)
        noise = world.noise(state, "pytest")
        if failing:
            names = "\n".join(f"FAILED {target}::test_case_{i}" for i in range(fixed, 4))
            text = f"{names}\n{failing} failed, {8 - failing} passed {noise}"
        else:
            text = f"8 passed {noise}"
        return _out(text, bool(failing)), frozenset({f"tests:{target}:{digest(state.written)}"}), state
    return _out(f"bash: {prog}: command not found", True), frozenset({f"sh:unknown:{prog}"}), state
