"""The shell persona: a coding agent whose only tool is ``bash``.

It reads (``cat``, ``sed -n``, ``grep``), edits (``sed -i``, ``cat > f <<EOF``,
``python - <<EOF``, ``git checkout``) and tests (``pytest``) through one command tool,
so the state change is visible only in the command text. A clean run is edit -> re-run
the same test -> edit -> re-run (``shell_edit_test``, a hard negative for any guard that
keys on tool names or on repeated calls); a looping run re-runs the same test or
command with no edit in between, re-reads a file it has read, or "edits" with a
pattern that is not in the file (``shell_rerun``).
"""
from __future__ import annotations

import random
import re
from typing import Any

from detectors.protocol import ToolCall

from ..base import Scenario, family
from ..shell import current
from .builder import PathBuilder, ScriptError, span
from .hard_negatives import TREE, finish, start_world
from .loops import Stuck, build_looping
from .real_loops import REAL

SHELL = ("bash",)
TEST_COMMANDS = ("python -m pytest tests -q", "pytest tests/ -x -q", "python -m pytest -q", "pytest -q tests")


def bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command})


def read_command(path: str, rng: random.Random) -> str:
    return rng.choice((f"cat {path}", f"sed -n '1,40p' {path}", f"sed -n '1,{rng.randint(5, 30)}p' {path}"))


def edit_command(b: PathBuilder, path: str, rng: random.Random, r: int) -> str:
    """A command that really changes ``path``, in one of the ways shell agents edit."""
    content = current(b.world, b.ws, path) or ""
    values = re.findall(r"value=\d+", content)
    how = rng.choice(("sed", "sed", "heredoc", "python"))
    if how == "sed" and values:
        old = rng.choice(values)
        return f"sed -i 's/{old}/value={rng.randint(10000, 99999)}/' {path}"
    if how == "heredoc":
        return f"cat > {path} <<'EOF'\n{content}\n# fix {r}: handle the empty case\nEOF"
    return (f"python - <<'EOF'\nfrom pathlib import Path\np = Path('{path}')\ns = p.read_text()\n"
            f"Path('{path}').write_text(s + '\\n# fix {r}')\nEOF")


@family("shell_edit_test", looping=False, rounds=(2, 4), **TREE)
def shell_edit_test(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Shell only: edit (sed -i, heredoc, script, git checkout) -> re-run the same test, while results change."""
    world, b = start_world(rng)
    test = bash(rng.choice(TEST_COMMANDS))
    b.add_productive(rng.randint(0, 2), tools=SHELL)
    b.add(test, thought="Running the tests first.")
    src = sorted(f for f in world.files if f.startswith("src/"))
    rng.shuffle(src)
    reverted = False
    for r in range(rng.randint(*span(p["rounds"]))):
        path = src[r % len(src)]
        read = bash(read_command(path, rng))
        if b.gains(read):
            b.add(read, thought=f"Reading {path}.")
        b.add(bash(edit_command(b, path, rng, r)), thought=f"Editing {path}.")
        if r and not reverted and rng.random() < 0.3:  # a bad edit, undone before re-testing
            b.add(bash(f"sed -i 's/line 1/line one/' {src[0]}"), thought="Trying a quick change.")
            b.add(test, thought="Re-running the tests.")
            b.add(bash(f"git checkout -- {src[0]}"), thought="That made it worse; reverting.")
            reverted = True
        if b.gains(read) and rng.random() < 0.5:  # re-reading the edited file shows the edit
            b.add(read, thought=f"Checking my edit to {path}.")
        b.add(test, thought="Re-running the same tests after the edit.")
    return finish(world, b, rng, p, tools=SHELL, test=test.args["command"], reverted=reverted)


@family("shell_rerun", looping=True, **REAL)
def shell_rerun(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Shell only: the same test re-run with no edit between, a file re-read, or edits that change nothing."""

    def prefix(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> None:
        b.add_productive(rng.randint(0, 4), tools=SHELL)

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        test = bash(rng.choice(TEST_COMMANDS))
        src = sorted(f for f in b.world.files if f.startswith("src/"))
        path = rng.choice(src)
        read = bash(read_command(path, rng))
        if b.gains(test):
            b.add(test, thought="Running the tests.")
        if b.gains(read):
            b.add(read, thought=f"Reading {path}.")
        if rng.random() < 0.6:  # a real edit and a re-test first: the loop starts after progress
            b.add(bash(edit_command(b, path, rng, 0)), thought=f"Editing {path}.")
            b.add(test, thought="Re-running the tests after the edit.")
            again = bash(f"cat {path}")
            if b.gains(again):
                b.add(again, thought="Checking the edit.")
                read = again
        n = int(rng.randint(*span(p["loop_length"])))
        variant = rng.choice(("rerun", "rerun", "reread", "noop_edit"))
        if variant == "noop_edit":  # the agent has seen the whole file, so an edit that changes nothing shows nothing
            full = bash(f"cat {path}")
            if b.gains(full):
                b.add(full, thought=f"Reading all of {path}.")
        if variant == "rerun":
            calls = [test] * n
        elif variant == "reread":
            calls = [read if i % 2 == 0 else test for i in range(n)] if rng.random() < 0.5 else [read] * n
        else:  # sed patterns that are not in the file: the command says "edit", the file does not change
            calls = []
            for i in range(n):
                if i % 2:
                    calls.append(test)
                else:
                    calls.append(bash(f"sed -i 's/value={rng.randint(10000, 99999)}x/value={rng.randint(1, 9)}/' {path}"))
        if not calls:
            raise ScriptError("empty loop")
        return Stuck(calls, meta={"variant": variant, "test": test.args["command"]})

    return build_looping(rng, p, "shell_rerun", setup, prefix=prefix, tools=SHELL)
