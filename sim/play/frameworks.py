"""Closed loop inside a real framework: a scenario's scripted agent played through pydantic-ai.

The persona is pydantic-ai's scripted model (a ``FunctionModel`` that asks the same
``scenarios.agents.Agent`` the built-in harness asks), the world's tools are pydantic-ai
tools (``Tool.from_schema``, sequential, so calls of one turn hit the world in order, as in
the built-in harness), and the detector is installed through ``adapters.pydantic_ai``.
Linear scenarios only (every turn ``join``): a framework's run has one path, so the
built-in harness's branch turns have no counterpart. ``ClosedLoopStats`` come out as
the built-in harness (``sim.play.harness.simulate``) counts them.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from detectors.protocol import Detector, Observation, ToolCall
from scenarios.agents import Agent as Persona
from scenarios.base import Scenario
from scenarios.world import TOKEN_PRICE, WorldState

from sim.play.harness import ClosedLoopStats


class Unsupported(ValueError):
    """A scenario this harness cannot play (a branch turn)."""


@dataclass
class _Play:
    persona: Persona
    state: Any
    world: Any
    ws: WorldState = field(default_factory=WorldState)
    known: frozenset = frozenset()
    turn: Any = None
    turn_no: int = 0
    calls: int = 0  # calls on the path that got a result (run or nudged)
    ran: dict = field(default_factory=dict)  # call id -> (Observation, is_loop)
    stats: ClosedLoopStats = field(default_factory=ClosedLoopStats)


def play_pydantic_ai(scenario: Scenario, detector: Detector) -> ClosedLoopStats:
    from pydantic_ai import Agent, ModelRetry, UsageLimits
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import FunctionToolset

    from adapters import LoopHalted
    from adapters.pydantic_ai import LoopGuardToolset
    from detectors.guard import LoopGuard

    persona = Persona(scenario.persona, scenario.seed, scenario.recover_p)
    play = _Play(persona, persona.start(scenario.script), scenario.world)

    def respond(messages, info):
        if play.turn is not None:  # read the last turn's results, as the agent does
            returned = {p.tool_call_id: p for p in messages[-1].parts if isinstance(p, ToolReturnPart)}
            results = []
            for call in play.turn.calls:
                if call.call_id in play.ran:
                    results.append(play.ran[call.call_id][0])
                else:  # the guard answered instead of the tool: a nudge (or a pruned call)
                    part = returned.get(call.call_id)
                    results.append(Observation(str(part.content), nudge=True) if part is not None else None)
            play.state = persona.observe(play.state, play.turn, results)
            play.calls += sum(r is not None for r in results)
        if play.calls >= scenario.horizon:
            # The scenario's budget of calls on a path, as the built-in harness counts it (a
            # framework's own limit, e.g. UsageLimits(tool_calls_limit=), raises instead).
            play.turn, play.stats.ended, play.stats.success = None, "budget", False
            return ModelResponse(parts=[TextPart("budget exhausted")])
        turn = persona.propose(play.state, f"t{play.turn_no}-c")
        play.turn_no += 1
        while not turn.final and not turn.calls:
            # A thought without calls (a re-plan): in pydantic-ai a text-only response ends
            # the run, so the persona goes on thinking within the same model response.
            play.state = persona.observe(play.state, turn, ())
            turn = persona.propose(play.state, f"t{play.turn_no}-c")
            play.turn_no += 1
        if turn.final:
            play.turn = None
            play.state = persona.observe(play.state, turn, ())
            play.stats.success = not play.state.failed
            play.stats.ended = "gave_up" if (play.state.looping and not play.state.loop_done) else (
                "blocked" if play.state.failed else "completed")
            return ModelResponse(parts=[TextPart(turn.thought)])
        if turn.mode != "join":
            raise Unsupported(f"{scenario.id}: a branch turn (the framework's run has one path)")
        play.turn = turn
        return ModelResponse(parts=[TextPart(turn.thought)] + [
            ToolCallPart(c.tool, dict(c.args), tool_call_id=c.call_id) for c in turn.calls])

    def world_tool(name: str) -> Tool:
        def run(ctx, **args):
            call = ToolCall(name, args, ctx.tool_call_id)
            res = play.world.execute(play.ws, call)
            is_loop = res.facts <= play.known
            play.ws, play.known = res.state, play.known | res.facts
            play.ran[ctx.tool_call_id] = (res.observation, is_loop)
            spend = res.price + res.tokens * TOKEN_PRICE
            play.stats.executed += 1
            play.stats.spend += spend
            if is_loop:
                play.stats.wasted_calls += 1
                play.stats.wasted_spend += spend
            if res.observation.error:  # pydantic-ai's way for a tool to report a failure to the model
                raise ModelRetry(res.observation.content)
            return res.observation.content
        return Tool.from_schema(run, name, f"world tool {name}", {"type": "object", "additional_properties": True},
                                takes_ctx=True, sequential=True)

    class CountingGuard(LoopGuard):
        """The adapter's guard, counting its interventions as the built-in harness does
        (an intervention is false when the call would have gained something)."""

        def check(self, tool, args=None):
            decision = super().check(tool, args)
            if str(decision.verdict) != "allow":
                play.stats.interventions[str(decision.verdict)] += 1
                if not play.world.execute(play.ws, ToolCall(tool, dict(args or {}))).facts <= play.known:
                    play.stats.false_interventions += 1
            return decision

    names = sorted({m[3:] for m in dir(play.world) if m.startswith("_t_")})
    # Retries unbounded here: the persona, not pydantic-ai's retry budget, decides when to stop.
    toolset = LoopGuardToolset(FunctionToolset([world_tool(n) for n in names], max_retries=10_000),
                               factory=lambda: CountingGuard(detector))
    agent = Agent(FunctionModel(respond), toolsets=[toolset])
    try:
        agent.run_sync(scenario.id, usage_limits=UsageLimits(request_limit=scenario.horizon + 10))
    except LoopHalted as halt:
        play.stats.ended = "escalated" if str(halt.decision.verdict) == "escalate" else "stopped"
        play.stats.success = False
    play.stats.interventions = Counter(play.stats.interventions)
    return play.stats
