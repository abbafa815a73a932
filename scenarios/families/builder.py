"""Writing scripts against the world: a builder that knows what each call would gain.

A family author adds turns through a ``PathBuilder``, which executes them on its own
copy of the path's world state. ``productive()`` draws a fresh call that the world
says gains something; ``expect()`` fails loudly when the author's intent (loop or
progress) disagrees with the world. Loop calls are checked the same way before a
scenario is handed out.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from detectors.protocol import ToolCall

from ..agents import Intent, LoopSpec, Script
from ..editor import EDITOR, SHELL, editor_view, sh
from ..lexicon import CONCEPTS
from ..text import render
from ..world import World, WorldState

CONCEPT_NAMES = sorted(CONCEPTS)


def span(v) -> tuple[int, int]:
    """A family parameter as an inclusive range: ``(lo, hi)``, ``[lo, hi]`` or one number."""
    return (int(v), int(v)) if isinstance(v, (int, float)) else (int(v[0]), int(v[1]))


def loop_length(rng: random.Random, p: dict[str, Any]) -> int:
    """A looping family's stuck stretch: drawn from its ``loop_length`` parameter."""
    return rng.randint(*span(p["loop_length"]))


class ScriptError(AssertionError):
    """A family tried to build a call whose world verdict contradicts its intent."""


@dataclass
class PathBuilder:
    world: World
    rng: random.Random
    ws: WorldState = field(default_factory=WorldState)
    known: frozenset[str] = frozenset()
    turns: list[Intent] = field(default_factory=list)
    history: list[ToolCall] = field(default_factory=list)

    _memo: tuple | None = field(default=None, repr=False)

    # -- what the world says ----------------------------------------------------------
    def _execute(self, call: ToolCall):
        # gains() then run() on the same call is the common pattern: execute once.
        memo = self._memo
        if memo is not None and memo[0] is call and memo[1] is self.ws:
            return memo[2]
        res = self.world.execute(self.ws, call)
        self._memo = (call, self.ws, res)
        return res

    def gains(self, call: ToolCall) -> bool:
        return not self._execute(call).facts <= self.known

    def run(self, call: ToolCall) -> bool:
        res = self._execute(call)
        gained = not res.facts <= self.known
        self.ws, self.known = res.state, self.known | res.facts
        self.history.append(call)
        return gained

    def fork(self) -> "PathBuilder":
        return PathBuilder(self.world, random.Random(self.rng.random()), self.ws, self.known, [], list(self.history))

    # -- adding turns --------------------------------------------------------------------
    def add(self, *calls: ToolCall, thought: str = "", loop: bool = False, kind: str | None = None,
            plan: tuple[str, ...] | None = None) -> None:
        """A joined turn of ``calls``; each must be a loop iff ``loop``."""
        for c in calls:
            if self.run(c) == loop:
                raise ScriptError(f"{c.tool}({dict(c.args)}) was meant to {'gain nothing' if loop else 'gain something'}")
        self.turns.append(Intent(tuple(calls), thought or _thought(calls[0] if calls else None), "join",
                                 (loop,) * len(calls), kind if loop else None, plan))

    def productive(self, tools: tuple[str, ...] = ("search", "read_file", "list_dir", "calc", "http_get"),
                   tries: int = 200) -> ToolCall:
        """A fresh call that gains something on this path."""
        for _ in range(tries):
            call = self._candidate(self.rng.choice(tools))
            if call is not None and self.gains(call):
                return call
        raise ScriptError(f"no productive call found among {tools}")

    def add_productive(self, n: int = 1, per_turn: tuple[int, ...] = (1, 1, 1, 2), **kw) -> None:
        """``n`` fresh productive calls, sometimes two in one joined turn."""
        made = 0
        while made < n:
            calls = []
            for _ in range(min(self.rng.choice(per_turn), n - made)):
                c = self.productive(**kw)
                self.run(c)  # so the next call of the same turn is drawn against it
                calls.append(c)
            self.turns.append(Intent(tuple(calls), _thought(calls[0]), "join", (False,) * len(calls)))
            made += len(calls)

    def _candidate(self, tool: str) -> ToolCall | None:
        rng = self.rng
        if tool == "search":
            cs = rng.sample(CONCEPT_NAMES, rng.choice((1, 2, 2, 2)))
            return ToolCall("search", {"query": render(cs, rng)})
        if tool == "read_file":
            return ToolCall("read_file", {"path": rng.choice(sorted(self.world.files))})
        if tool == "list_dir":
            return ToolCall("list_dir", {"path": rng.choice(self.world.dirs())})
        if tool == "calc":
            a, b = rng.randint(2, 999), rng.randint(2, 99)
            return ToolCall("calc", {"expression": f"{a} {rng.choice('+-*')} {b}"})
        if tool == "bash":
            return shell_read(self.world, rng)
        if tool == EDITOR:
            return editor_view(self.world, rng)
        if tool == SHELL:
            return sh(shell_read(self.world, rng).args["command"])
        if tool == "http_get":
            return ToolCall("http_get", {"url": f"https://docs.example.com/{rng.choice(CONCEPT_NAMES)}/{rng.randint(1, 500)}"})
        return None

    def script(self, loop: LoopSpec | None = None, branches: tuple[Script, ...] = (), final: str = "Final answer: done.") -> Script:
        return Script(tuple(self.turns), branches, loop, final)

    def check_loop(self, calls: list[ToolCall], productive: frozenset[int] = frozenset()) -> None:
        """Fail loudly unless each stuck call gains nothing (bar the ``productive`` ones)."""
        b = PathBuilder(self.world, self.rng, self.ws, self.known)
        for i, c in enumerate(calls):
            if b.run(c) != (i in productive):
                raise ScriptError(f"stuck call {i} {c.tool}({dict(c.args)}) "
                                  f"{'gains something' if i not in productive else 'gains nothing'}")


def _thought(call: ToolCall | None) -> str:
    if call is None:
        return ""
    first = next(iter(call.args.values()), "") if call.args else ""
    return f"Next I will use {call.tool} on {str(first)[:60]!r}."


def fixed_loop(at: int, kind: str, calls: list[ToolCall], *, productive: frozenset[int] = frozenset(),
               per_turn: int = 1, on_nudge: list[ToolCall] | None = None, resume: bool = False) -> LoopSpec:
    """A LoopSpec over a precomputed list of stuck calls."""
    seq = list(calls)
    alt = list(on_nudge) if on_nudge else None
    return LoopSpec(
        at=at,
        kind=kind,
        calls=lambda i, _rng: seq[i % len(seq)],
        length=len(seq),
        on_nudge=(lambda i, _rng: alt[i % len(alt)]) if alt else None,
        per_turn=per_turn,
        productive=productive,
        uses_rng=False,
        resume=resume,
    )


def shell_read(world: World, rng: random.Random) -> ToolCall:
    """A command that only looks: what a shell-only agent explores a repository with."""
    path = rng.choice(sorted(world.files))
    form = rng.randrange(4)
    if form == 0:
        cmd = f"cat {path}"
    elif form == 1:
        start = rng.randint(1, 4)
        cmd = f"sed -n '{start},{start + rng.randint(2, 12)}p' {path}"
    elif form == 2:
        cmd = f"ls {rng.choice(world.dirs())}"
    else:
        cmd = f"grep -n {rng.choice(('line', 'value', 'line 1', 'line 2', 'value=1'))!r} {path}"
    return ToolCall("bash", {"command": cmd})
