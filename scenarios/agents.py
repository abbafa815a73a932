"""Stub-LLM agents: scripted, seeded policies that play the model.

A scenario hands the agent a ``Script`` (the productive work, as turns) and optionally
a ``LoopSpec`` (where and how it gets stuck). The agent reads what happened on its
path — its earlier turns and the observations, including a guard's nudge — and
proposes the next turn. Personas differ in how they loop and how they react to a
nudge. The agent's cursor rides along the path (``AgentState``), so every branch of a
tree continues its own way.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from detectors.protocol import Observation, ToolCall

PERSONAS = ("diligent", "stubborn", "paraphraser", "evasive", "obedient", "planner")


@dataclass(frozen=True, slots=True)
class Intent:
    """One planned turn: the calls the agent proposes together, and how they run.

    ``mode`` is ``join`` (the calls run one after another on one path and all results
    feed the next turn) or ``branch`` (each call starts its own path; the script then
    continues with ``Script.branches[i]`` on path i). ``expect_loop`` is what the script
    author intends each call to be; the world's verdict must agree (label validation).
    """

    calls: tuple[ToolCall, ...]
    thought: str = ""
    mode: str = "join"
    expect_loop: tuple[bool, ...] | None = None
    kind: str | None = None  # loop kind for calls expected to be loops
    plan: tuple[str, ...] | None = None  # a (re-)plan declared with this turn

    def expected(self, i: int) -> bool:
        return bool(self.expect_loop[i]) if self.expect_loop is not None else False


@dataclass(frozen=True, slots=True)
class LoopSpec:
    """Where the agent gets stuck and what it proposes while stuck.

    ``at`` is the index of the script turn before which the loop starts; ``calls(i, rng)``
    gives the i-th stuck call; ``length`` stuck calls are made before the agent gives up
    (the task then fails) or, with ``resume``, goes back to its work on its own (a blip: the
    turns from ``at`` on). ``on_nudge`` gives the reworded calls an evasive agent makes
    after a nudge. ``per_turn`` stuck calls are proposed in one turn (a parallel burst).
    """

    at: int
    kind: str
    calls: Callable[[int, random.Random], ToolCall]
    length: int
    on_nudge: Callable[[int, random.Random], ToolCall] | None = None
    per_turn: int = 1
    thought: str = "That did not give me what I need; let me try again."
    evade_thought: str = "Understood. Let me phrase it differently."
    uses_rng: bool = True  # False when ``calls`` ignores its rng (skips seeding one per turn)
    productive: frozenset[int] = frozenset()  # stuck-phase calls that do gain something
    resume: bool = False  # after ``length`` stuck calls the agent moves on instead of giving up


@dataclass(frozen=True)
class Script:
    """The productive work as turns; a branching last turn continues in ``branches``."""

    turns: tuple[Intent, ...]
    branches: tuple["Script", ...] = ()
    loop: LoopSpec | None = None
    final: str = "Final answer: done."


@dataclass(frozen=True, slots=True)
class AgentState:
    """The agent's cursor on one path."""

    script: Script
    turn: int = 0
    looping: bool = False
    loop_done: bool = False
    loop_i: int = 0  # stuck calls made so far
    nudges: int = 0
    evading: bool = False
    blocked: int = 0  # productive calls that a guard refused
    finished: bool = False
    failed: bool = False
    branch_path: tuple[int, ...] = ()

    # ``dataclasses.replace`` costs more than the rest of a simulated turn; these are the two
    # changes ``Agent.observe`` makes on almost every turn, as plain constructor calls.
    def next_turn(self, blocked: int, nudges: int) -> "AgentState":
        """This state after a turn off the loop: the next turn, with refused calls and nudges added."""
        return AgentState(self.script, self.turn + 1, self.looping, self.loop_done, self.loop_i, self.nudges + nudges,
                          self.evading, self.blocked + blocked, self.finished, self.failed, self.branch_path)

    def looped(self, calls: int) -> "AgentState":
        """This state after a turn of ``calls`` stuck calls."""
        return AgentState(self.script, self.turn, True, self.loop_done, self.loop_i + calls, self.nudges,
                          self.evading, self.blocked, self.finished, self.failed, self.branch_path)


@dataclass(frozen=True, slots=True)
class Turn:
    thought: str
    calls: tuple[ToolCall, ...]
    mode: str
    expect_loop: tuple[bool, ...]
    kind: str | None
    plan: tuple[str, ...] | None = None
    final: bool = False


@dataclass
class Agent:
    """A persona playing the model. ``recover_p`` is the obedient persona's chance to
    change course after a nudge; everything random is drawn from ``seed``."""

    persona: str = "diligent"
    seed: int = 0
    recover_p: float = 0.7

    def __post_init__(self) -> None:
        if self.persona not in PERSONAS:
            raise ValueError(f"unknown persona {self.persona!r} (known: {', '.join(PERSONAS)})")

    def _rng(self, state: AgentState, salt: str) -> random.Random:
        return random.Random(f"{self.seed}:{state.branch_path}:{state.turn}:{state.loop_i}:{state.nudges}:{salt}")

    def start(self, script: Script) -> AgentState:
        return AgentState(script)

    def propose(self, state: AgentState, call_prefix: str) -> Turn:
        script = state.script
        loop = script.loop
        if loop is not None and not state.loop_done and state.turn >= loop.at:
            if state.loop_i >= loop.length:
                return Turn("I keep getting the same thing. I give up on this.", (), "join", (), None, final=True)
            rng = self._rng(state, "loop") if loop.uses_rng else None
            gen = loop.on_nudge if (state.evading and loop.on_nudge is not None) else loop.calls
            n = min(loop.per_turn, loop.length - state.loop_i)
            calls = tuple(_with_id(gen(state.loop_i + j, rng), f"{call_prefix}{j}") for j in range(n))
            kind = "evasion" if state.evading else loop.kind
            expect = tuple((state.loop_i + j) not in loop.productive for j in range(n))
            return Turn(loop.evade_thought if state.evading else loop.thought, calls, "join", expect, kind)
        if state.turn < len(script.turns):
            intent = script.turns[state.turn]
            calls = tuple(_with_id(c, f"{call_prefix}{j}") for j, c in enumerate(intent.calls))
            expect = tuple(intent.expected(j) for j in range(len(calls)))
            return Turn(intent.thought, calls, intent.mode, expect, intent.kind, intent.plan)
        return Turn(script.final, (), "join", (), None, final=True)

    def observe(self, state: AgentState, turn: Turn, results: Sequence[Observation | None]) -> AgentState:
        """The state after the agent read the results of ``turn`` on this path."""
        if turn.final:
            return replace(state, finished=True, failed=state.failed or state.blocked > 0 or (state.looping and not state.loop_done))
        script = state.script
        loop = script.loop
        in_loop = loop is not None and not state.loop_done and state.turn >= loop.at
        nudged = any(r is not None and r.nudge for r in results)
        if in_loop:
            state = state.looped(len(turn.calls))
            if nudged:
                state = replace(state, nudges=state.nudges + 1)
                if self._recovers(state):
                    state = replace(state, loop_done=True, evading=False)
                elif self.persona == "evasive" and loop.on_nudge is not None:
                    state = replace(state, evading=True)
            if loop.resume and state.loop_i >= loop.length:  # a blip: back to work unprompted
                state = replace(state, loop_done=True, evading=False)
            return state
        blocked = sum(1 for r, e in zip(results, turn.expect_loop) if (r is None or r.nudge) and not e)
        return state.next_turn(blocked, nudged)

    def _recovers(self, state: AgentState) -> bool:
        if self.persona == "diligent":
            return True
        if self.persona in ("obedient", "planner"):
            # A planner told "X is done, do Y instead" follows the redirect as often as an
            # obedient agent follows a nudge.
            return self._rng(state, "recover").random() < self.recover_p
        return False  # stubborn and paraphraser ignore nudges; evasive rewords instead

    def enter_branch(self, state: AgentState, i: int) -> AgentState:
        """Continue on branch ``i`` of a branching turn."""
        branches = state.script.branches
        if not branches:
            return state
        return AgentState(branches[i % len(branches)], branch_path=state.branch_path + (i,), nudges=state.nudges,
                          blocked=state.blocked)


def _with_id(call: ToolCall, call_id: str) -> ToolCall:
    return ToolCall(call.tool, call.args, call_id, call.step, call.turn)
