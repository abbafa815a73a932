"""The multi-tool coding persona: an editor tool (``str_replace_editor``) plus a shell (``execute_bash``).

The agents most people run to fix code — OpenHands' CodeAct agent, SWE-agent, and the
harnesses built on Anthropic's text-editor tool — read and edit files through the editor
and run tests and reproduction scripts through the shell (``scenarios.editor`` has the
tools' documented semantics). Their clean runs repeat calls all the time: the same test
command after every edit, the same ``view`` of a file right after editing it. Public runs
follow the cycle reproduce -> view -> ``str_replace`` -> re-run, which is what these
families script: SWE-agent's own demonstration run for this tool set
(princeton-nlp/SWE-agent, ``trajectories/demonstrations/str_replace_anthropic_demo.yaml``:
view the repository, view the file, ``str_replace``, submit) and the instance template it
ships ("create a script to reproduce the error ... edit the source ... rerun your reproduce
script"), which OpenHands' CodeAct prompt follows too. A
guard that does not know the editor's ``str_replace`` is a write takes every re-run after
an edit for a loop (issue 38: the class behind 18 of 20 false alarms on held-out multi-tool
runs); a guard that takes every editor call for a write lets a re-``view`` with no edit
between run on forever.

Healthy (every call gains something):

- ``editor_edit_test``: test -> view -> ``str_replace`` -> the same test again, for a few
  rounds over the source files (the repair cycle of OpenHands / SWE-agent runs);
- ``editor_edit_view``: an edit, then the identical ``view`` of the file to check it,
  with ``insert`` and ``undo_edit`` among the edits (the agents' habit of re-viewing what
  they changed);
- ``editor_reproduce_fix``: ``create`` a reproduction script, run it (it fails), fix the
  source one file at a time re-running the script after each fix, then run the tests
  (the reproduce-fix-verify workflow OpenHands' and SWE-agent's prompts prescribe);
- ``editor_focus``: a file read whole, then narrowed in on — a grep, a slice, after an edit
  that did not match a narrower slice — and edited (every narrower read shows text already
  read, as in a public OpenHands run).

Looping (the stuck calls gain nothing):

- ``editor_review``: re-viewing files already viewed, with no edit in between;
- ``editor_rerun``: the same failing test or script re-run with no edit in between
  (sometimes with a re-view of the source between runs);
- ``editor_nomatch``: the same ``str_replace`` failing "did not appear verbatim" again and
  again, sometimes with a re-view of the unchanged file between tries.
"""
from __future__ import annotations

import random
import re
from typing import Any

from detectors.protocol import ToolCall

from ..base import Scenario, family
from ..editor import EDITOR, SHELL, abs_path, sh, view
from ..shell import current
from .builder import PathBuilder, ScriptError, span
from .hard_negatives import TREE, finish, start_world
from .loops import Stuck, build_looping
from .real_loops import REAL

CODING = (EDITOR, SHELL)
TESTS = ("python -m pytest tests -q", "python -m pytest tests/ -x", "pytest -q tests", "python -m pytest -q")


def str_replace(b: PathBuilder, path: str, rng: random.Random) -> ToolCall:
    """A ``str_replace`` of one whole line of ``path`` as it is now: found exactly once."""
    content = current(b.world, b.ws, path) or ""
    lines = [line for line in content.split("\n")[1:] if line and content.count(line) == 1]
    if not lines:
        raise ScriptError(f"no unique line to replace in {path}")
    old = rng.choice(lines)
    new = re.sub(r"value=\d+", f"value={rng.randint(10000, 99999)}", old) if "value=" in old else old + "  # fixed"
    return ToolCall(EDITOR, {"command": "str_replace", "path": abs_path(path), "old_str": old, "new_str": new})


def sources(b: PathBuilder, rng: random.Random) -> list[str]:
    src = sorted(f for f in b.world.files if f.startswith("src/"))
    rng.shuffle(src)
    return src


def explore(b: PathBuilder, rng: random.Random, n: int) -> None:
    """A few looks around the repository (views, greps, listings) before the work."""
    if n:
        b.add_productive(n, tools=CODING)


@family("editor_edit_test", looping=False, rounds=(2, 4), **TREE)
def editor_edit_test(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Editor + shell: test -> view -> str_replace -> the same test again, for a few rounds (OpenHands/SWE-agent repairs)."""
    world, b = start_world(rng)
    test = sh(rng.choice(TESTS))
    explore(b, rng, rng.randint(0, 2))
    b.add(test, thought="Running the tests to see what fails.")
    src = sources(b, rng)
    for r in range(rng.randint(*span(p["rounds"]))):
        path = src[r % len(src)]
        if b.gains(view(path)):
            b.add(view(path), thought=f"Let me look at {path}.")
        b.add(str_replace(b, path, rng), thought=f"Fixing {path}.")
        b.add(test, thought="Re-running the same tests after the edit.")
    return finish(world, b, rng, p, tools=CODING, test=test.args["command"])


@family("editor_edit_view", looping=False, rounds=(2, 4), **TREE)
def editor_edit_view(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Editor + shell: edit (str_replace, insert, undo_edit), then the identical view of the file to check the edit."""
    world, b = start_world(rng)
    explore(b, rng, rng.randint(0, 2))
    src = sources(b, rng)
    undone = False
    for r in range(rng.randint(*span(p["rounds"]))):
        path = src[r % len(src)]
        look = view(path)
        if b.gains(look):
            b.add(look, thought=f"Opening {path}.")
        how = rng.choice(("str_replace", "str_replace", "insert"))
        if how == "insert":
            n = len((current(world, b.ws, path) or "").split("\n"))
            edit = ToolCall(EDITOR, {"command": "insert", "path": abs_path(path), "insert_line": rng.randint(1, n),
                                     "new_str": f"# guard for the empty case ({r})"})
        else:
            edit = str_replace(b, path, rng)
        b.add(edit, thought=f"Editing {path}.")
        b.add(look, thought="Viewing the file again to check the edit.")
        if not undone and rng.random() < 0.3:  # a wrong edit, undone and checked
            b.add(ToolCall(EDITOR, {"command": "undo_edit", "path": abs_path(path)}), thought="That was wrong; undoing.")
            b.add(look, thought="Checking the file is back as it was.")
            undone = True
    b.add(sh(rng.choice(TESTS)), thought="Running the tests.")
    return finish(world, b, rng, p, tools=CODING, undone=undone)


@family("editor_reproduce_fix", looping=False, fixes=(2, 4), **TREE)
def editor_reproduce_fix(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Editor + shell: create reproduce.py, run it, fix the source file by file re-running it, then run the tests."""
    world, b = start_world(rng)
    explore(b, rng, rng.randint(0, 2))
    script = rng.choice(("reproduce.py", "reproduce_issue.py", "repro.py"))
    b.add(ToolCall(EDITOR, {"command": "create", "path": abs_path(script),
                            "file_text": "from src import core\n\nassert core.width(0) == 0\nprint('ok')\n"}),
          thought="Writing a script that reproduces the issue.")
    run = sh(f"python {script}")
    b.add(run, thought="Running the reproduction.")
    for path in sources(b, rng)[:rng.randint(*span(p["fixes"]))]:
        if b.gains(view(path)):
            b.add(view(path), thought=f"Reading {path}.")
        b.add(str_replace(b, path, rng), thought=f"Fixing {path}.")
        b.add(run, thought="Re-running the reproduction script.")
    b.add(sh(rng.choice(TESTS)), thought="Now the test suite.")
    return finish(world, b, rng, p, tools=CODING, script=script)


@family("editor_focus", looping=False, **TREE)
def editor_focus(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Editor + shell: read a file whole, then narrow in on what was read — grep it, view a slice
    of it — and edit; an edit whose ``old_str`` does not match is followed by a narrower view of
    the same lines and the edit that does; then the tests.

    Real class: a public OpenHands run on Multi-SWE-bench (ponylang/ponyc, issue 4588; no
    scored corpus): the agent views ``match.c`` whole, greps it, views lines 282-449, tries a
    ``str_replace`` whose ``old_str`` carries the view's line numbers, views lines 312-317 and
    edits them. Each narrower read shows text already read; each is a new look (the editor's
    slice, a grep's hits), and the run went on to fix the issue. A guard that counts results
    with nothing new takes the edit after them, or the narrower view after the failed edit, for
    a loop (the ``write_acts`` and ``known_reread`` rules of ``progress_guard``)."""
    world, b = start_world(rng)
    explore(b, rng, rng.randint(0, 2))
    path = sources(b, rng)[0]
    content = current(world, b.ws, path) or ""
    lines = content.split("\n")
    unique = [i for i, line in enumerate(lines) if i and line and content.count(line) == 1 and i + 1 < len(lines)]
    if not unique:
        raise ScriptError(f"no unique line to edit in {path}")
    at = rng.choice(unique)  # 0-based; the editor numbers lines from 1
    line = lines[at]
    look = view(path)
    if b.gains(look):
        b.add(look, thought=f"Opening {path}.")
    word = rng.choice(line.split()[2:-1] or line.split())
    b.add(sh(f"grep -n {word} {path}"), thought=f"Where does {path} mention {word}?")
    lo = max(1, at + 1 - rng.randint(2, 6))
    hi = min(len(lines), at + 1 + rng.randint(2, 6))
    b.add(ToolCall(EDITOR, {"command": "view", "path": abs_path(path), "view_range": [lo, hi]}),
          thought=f"The lines around line {at + 1}.")
    new = re.sub(r"value=\d+", f"value={rng.randint(10000, 99999)}", line)
    pasted = rng.random() < 0.6
    if pasted:
        # the slice's line numbers pasted into old_str: "did not appear verbatim"
        misread = f"{line}\n{at + 2:>6}\t{lines[at + 1]}"
        b.add(ToolCall(EDITOR, {"command": "str_replace", "path": abs_path(path), "old_str": misread, "new_str": new}),
              thought=f"Fixing line {at + 1}.")
        b.add(ToolCall(EDITOR, {"command": "view", "path": abs_path(path), "view_range": [at + 1, at + 2]}),
              thought="The replacement did not match; the exact text of those lines.")
    b.add(ToolCall(EDITOR, {"command": "str_replace", "path": abs_path(path), "old_str": line, "new_str": new}),
          thought=f"Fixing line {at + 1}.")
    b.add(sh(rng.choice(TESTS)), thought="Running the tests.")
    return finish(world, b, rng, p, tools=CODING, pasted=pasted)


def _prefix(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> None:
    explore(b, rng, rng.randint(0, 3))


def _progress_first(b: PathBuilder, rng: random.Random, test: ToolCall, path: str) -> None:
    """Sometimes a real edit-and-re-test before the loop: the loop starts after progress."""
    if rng.random() < 0.5:
        b.add(str_replace(b, path, rng), thought=f"Editing {path}.")
        b.add(test, thought="Re-running the tests after the edit.")


@family("editor_review", looping=True, **REAL)
def editor_review(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Editor + shell: the same files viewed again and again with no edit in between."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        src = sources(b, rng)
        test = sh(rng.choice(TESTS))
        if b.gains(test):
            b.add(test, thought="Running the tests.")
        _progress_first(b, rng, test, src[0])
        files = src[:rng.choice((1, 2, 2, 3))]
        for f in files:
            if b.gains(view(f)):
                b.add(view(f), thought=f"Looking at {f}.")
        n = int(rng.randint(*span(p["loop_length"])))
        return Stuck([view(files[i % len(files)]) for i in range(n)], meta={"files": len(files)})

    return build_looping(rng, p, "editor_review", setup, prefix=_prefix, tools=CODING)


@family("editor_rerun", looping=True, **REAL)
def editor_rerun(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Editor + shell: the same failing test or reproduction re-run with no edit in between."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        src = sources(b, rng)
        if rng.random() < 0.5:
            run = sh(rng.choice(TESTS))
        else:
            script = rng.choice(("reproduce.py", "reproduce_bug.py"))
            b.add(ToolCall(EDITOR, {"command": "create", "path": abs_path(script), "file_text": "assert width(0) == 0\n"}),
                  thought="A script that reproduces the bug.")
            run = sh(f"python {script}")
        b.add(run, thought="Running it.")
        _progress_first(b, rng, run, src[0])
        look = view(src[0])
        if b.gains(look):
            b.add(look, thought=f"Reading {src[0]}.")
        n = int(rng.randint(*span(p["loop_length"])))
        with_view = rng.random() < 0.4
        calls = [look if with_view and i % 2 else run for i in range(n)]
        return Stuck(calls, meta={"with_view": with_view})

    return build_looping(rng, p, "editor_rerun", setup, prefix=_prefix, tools=CODING)


@family("editor_nomatch", looping=True, **REAL)
def editor_nomatch(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Editor + shell: the same str_replace failing "did not appear verbatim" again and again."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        path = sources(b, rng)[0]
        look = view(path)
        if b.gains(look):
            b.add(look, thought=f"Reading {path}.")
        line = next(x for x in (current(b.world, b.ws, path) or "").split("\n")[1:] if x)
        # what the model remembers of the line: the indentation or a word off, so it never matches
        wrong = "    " + line if rng.random() < 0.5 else line.replace("value=", "value = ")
        edit = ToolCall(EDITOR, {"command": "str_replace", "path": abs_path(path), "old_str": wrong,
                                 "new_str": re.sub(r"value=\d+", "value=0", line)})
        b.add(edit, thought=f"Fixing {path}.")  # the first failure tells the agent something
        n = int(rng.randint(*span(p["loop_length"])))
        with_view = rng.random() < 0.4
        calls = [look if with_view and i % 2 else edit for i in range(n)]
        return Stuck(calls, meta={"with_view": with_view})

    return build_looping(rng, p, "editor_nomatch", setup, prefix=_prefix, tools=CODING)
