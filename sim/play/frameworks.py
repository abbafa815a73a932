"""Closed loop inside real frameworks: a scenario's scripted agent played through pydantic-ai,
the OpenAI Agents SDK or LangChain (``loopbench run --harness``).

One path for the three (:class:`ScriptedRun`): the persona is the framework's scripted model
(a pydantic-ai ``FunctionModel``, an Agents SDK ``Model``, a LangChain chat model), each
asking the same ``scenarios.agents.Agent`` the built-in harness asks; the world's tools are
the framework's tools; the detector is installed through ``adapters`` at the framework's
documented hook. Only the glue that reads the model's input and builds its reply differs.

Linear scenarios only (every turn ``join``): a framework's run has one conversation, so the
built-in harness's branch turns (each call starting its own path) have no counterpart;
:func:`linear` says which, and playing a branching one raises :class:`Unsupported`.
``ClosedLoopStats`` come out as the built-in harness (``sim.play.harness.simulate``) counts
them. Where the frameworks differ from it, they differ as they do in production
(docs/adapters.md, "Closed loop inside the frameworks").
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from detectors.protocol import Detector, Observation, ToolCall, Verdict
from detectors.signature import canonical_json
from scenarios.agents import Agent as Persona
from scenarios.base import Scenario
from scenarios.world import TOKEN_PRICE, WorldState

from sim.play.harness import ClosedLoopStats
from sim.play.watchdog import Watchdog

BUILTIN = "builtin"
HARNESSES = (BUILTIN, "pydantic-ai", "openai-agents", "langchain")
#: Model requests a run may make beyond the scenario's horizon before the framework's own
#: limit ends it (the persona ends every run by then: the horizon counts its calls).
SPARE_REQUESTS = 10


#: The package each framework harness imports.
PACKAGES = {"pydantic-ai": "pydantic_ai", "openai-agents": "agents", "langchain": "langchain.agents"}


def missing_framework(harness: str) -> str | None:
    """The package a framework harness needs and this environment lacks (``None``: none)."""
    import importlib.util

    name = PACKAGES.get(harness)
    try:
        return name if name is not None and importlib.util.find_spec(name) is None else None
    except ModuleNotFoundError:  # the parent package is missing
        return name


class Unsupported(ValueError):
    """A scenario this harness cannot play (a branch turn)."""


def linear(scenario: Scenario) -> bool:
    """Whether every turn of the scenario's script runs on one path (no branch turn: a script
    that branches continues in ``Script.branches``)."""
    script = scenario.script
    return not script.branches and all(i.mode == "join" for i in script.turns)


@dataclass
class Reply:
    """What the persona answers to one model request: a thought, and calls or the end."""

    thought: str
    calls: list[tuple[str, str, dict]] = field(default_factory=list)  # (call id, tool, args)
    final: bool = False


class ScriptedRun:
    """The persona, the world and the statistics of one scenario's play in a framework.

    A framework's model asks :meth:`respond` with what it was shown for the last turn's calls
    (call id -> text); the framework's tools ask :meth:`run_tool`; the adapter's guard is
    :meth:`guard`, which counts interventions as the built-in harness does. A halt from
    the guard ends the run through the framework; the glue reports it with :meth:`halted`.
    """

    def __init__(self, scenario: Scenario, detector: Detector | None, watch: Watchdog | None = None):
        self.scenario, self.detector = scenario, detector
        self.watch = watch if watch is not None else Watchdog(None)
        self.persona = Persona(scenario.persona, scenario.seed, scenario.recover_p)
        self.state = self.persona.start(scenario.script)
        self.world = scenario.world
        self.ws, self.known = WorldState(), frozenset()
        self.turn: Any = None
        self.turn_no = 0
        self.calls = 0  # calls on the path that got a result (run or answered by the guard)
        self.ran: dict[str, Observation] = {}  # call id -> what the world returned
        self.widest = 0  # the most calls the persona proposed in one turn
        self.stats = ClosedLoopStats()

    @property
    def tools(self) -> list[str]:
        """The world's tool names (its declared tools and every tool it answers)."""
        return sorted(set(self.world.tools) | {m[3:] for m in dir(self.world) if m.startswith("_t_")})

    @property
    def request_limit(self) -> int:
        return self.scenario.horizon + SPARE_REQUESTS

    def respond(self, shown: Mapping[str, str]) -> Reply:
        p = self.persona
        if self.turn is not None:  # read the last turn's results, as the agent does
            results: list[Observation | None] = []
            for call in self.turn.calls:
                if call.call_id in self.ran:
                    results.append(self.ran[call.call_id])
                else:  # the guard answered instead of the tool: its nudge (or "call not run")
                    text = shown.get(call.call_id)
                    results.append(Observation(str(text), nudge=True) if text is not None else None)
            self.state = p.observe(self.state, self.turn, results)
            self.calls += sum(r is not None for r in results)
        if self.calls >= self.scenario.horizon:
            # The scenario's budget of calls on a path, as the built-in harness counts it.
            self.turn, self.stats.ended, self.stats.success = None, "budget", False
            return Reply("budget exhausted", final=True)
        turn = self._propose()
        while not turn.final and not turn.calls:
            # A thought without calls (a re-plan): in a framework a text-only reply ends the
            # run, so the persona goes on thinking within the same reply.
            self.state = p.observe(self.state, turn, ())
            turn = self._propose()
        if turn.final:
            gave_up = self.state.looping and not self.state.loop_done
            self.turn, self.state = None, p.observe(self.state, turn, ())
            self.stats.success = not self.state.failed
            self.stats.ended = "gave_up" if gave_up else ("blocked" if self.state.failed else "completed")
            return Reply(turn.thought, final=True)
        if turn.mode != "join":
            raise Unsupported(f"{self.scenario.id}: a branch turn (the framework's run has one path)")
        self.turn, self.widest = turn, max(self.widest, len(turn.calls))
        return Reply(turn.thought, [(c.call_id, c.tool, dict(c.args)) for c in turn.calls])

    def _propose(self) -> Any:
        turn = self.persona.propose(self.state, f"t{self.turn_no}-c")
        self.turn_no += 1
        return turn

    def run_tool(self, call_id: str, tool: str, args: Mapping[str, Any]) -> Observation:
        """Run a call the framework's tool received on the world; the caller shows an error
        observation to the model by its framework's means."""
        expected = {c.call_id: c for c in self.turn.calls} if self.turn is not None else {}
        mine = expected.get(call_id)
        if mine is None or mine.tool != tool or canonical_json(dict(mine.args)) != canonical_json(dict(args)):
            raise RuntimeError(f"{self.scenario.id}: the framework ran {tool}({dict(args)}) as {call_id!r}, "
                               "which the persona did not propose")
        res = self.world.execute(self.ws, ToolCall(tool, dict(args), call_id))
        is_loop = res.facts <= self.known
        self.ws, self.known = res.state, self.known | res.facts
        self.ran[call_id] = res.observation
        spend = res.price + res.tokens * TOKEN_PRICE
        self.stats.executed += 1
        self.stats.spend += spend
        if is_loop:
            self.stats.wasted_calls += 1
            self.stats.wasted_spend += spend
        return res.observation

    def guard(self) -> Any:
        """A fresh adapter guard over this run's detector, counting as the built-in harness does."""
        from detectors.guard import LoopGuard

        run = self

        class CountingGuard(LoopGuard):
            """An intervention is false when the call would have gained something."""

            def __init__(self, detector: Detector):
                run.watch.begin()
                try:
                    super().__init__(detector)
                finally:
                    run.watch.end()

            def check(self, tool, args=None):
                run.watch.begin()
                t0 = time.perf_counter_ns()
                try:
                    decision = super().check(tool, args)
                finally:
                    run.stats.check_ns.append(time.perf_counter_ns() - t0)
                    run.watch.end()
                if decision.verdict is not Verdict.ALLOW:
                    call = self._call(tool, args)
                    run.stats.interventions[str(decision.verdict)] += 1
                    if not run.world.execute(run.ws, ToolCall(call.tool, dict(call.args))).facts <= run.known:
                        run.stats.false_interventions += 1
                return decision

            def record(self, *a, **k):
                run.watch.begin()
                try:
                    super().record(*a, **k)
                finally:
                    run.watch.end()

        return CountingGuard(self.detector)

    def halted(self, verdict: str) -> None:
        self.stats.ended = "escalated" if verdict == str(Verdict.ESCALATE) else "stopped"
        self.stats.success = False

    def finish(self) -> ClosedLoopStats:
        self.stats.interventions = Counter(self.stats.interventions)
        return self.stats


def play(harness: str, scenario: Scenario, detector: Detector | None, watch: Watchdog | None = None) -> ClosedLoopStats:
    """Play ``scenario`` through ``harness``'s real agent loop, ``detector`` installed through
    its adapter (``None``: no guard). Raises :class:`Unsupported` on a branching scenario."""
    return play_run(harness, scenario, detector, watch).stats


def play_run(harness: str, scenario: Scenario, detector: Detector | None, watch: Watchdog | None = None) -> ScriptedRun:
    """:func:`play`, giving the whole :class:`ScriptedRun` (its ``stats`` and what the persona did)."""
    if harness not in PLAYERS:
        raise ValueError(f"unknown harness {harness!r} (known: {', '.join(HARNESSES)})")
    if not linear(scenario):
        raise Unsupported(f"{scenario.id}: a branching scenario (the framework's run has one path)")
    run = ScriptedRun(scenario, detector, watch)
    PLAYERS[harness](run)
    run.finish()
    return run


#: Frameworks that run the calls of one model response concurrently (``asyncio.gather``):
#: the guard checks every call of a turn before the first one's result is recorded.
CONCURRENT = frozenset({"openai-agents", "langchain"})


def reasons_to_differ(harness: str, builtin: Any, run: ScriptedRun) -> list[str]:
    """The documented framework behaviours that can make ``harness``'s play of a scenario (``run``,
    from :func:`play_run`) differ from the built-in harness's (``builtin``: its ``SimResult``
    with the same detector). The two plays are the same until the first of these comes into
    play, so each is read off the play where it shows (docs/adapters.md):

    - ``prune``: the guard pruned a call; a framework's run has no branch to drop, so the
      model is told "call not run" and goes on where the built-in harness ends the path;
    - ``concurrent``: a turn of several calls in a framework in :data:`CONCURRENT`;
    - ``error as text``: a failed call in the Agents SDK, whose function tools have no error
      status (the guard records the failure's text as an ordinary result);
    - ``messages``: a detector that reads the model's messages (``on_message``: its text, a
      declared plan), which the adapters, at the tool hook, never see.
    """
    reasons = []
    if builtin.stats.interventions.get("prune"):
        reasons.append("prune")
    nodes = builtin.episode.tool_nodes()
    if harness in CONCURRENT and run.widest > 1:
        reasons.append("concurrent")
    if harness == "openai-agents" and any(n.observation is not None and n.observation.error for n in nodes):
        reasons.append("error as text")
    if getattr(type(run.detector), "on_message", Detector.on_message) is not Detector.on_message:
        reasons.append("messages")
    return reasons


def play_pydantic_ai(scenario: Scenario, detector: Detector | None, watch: Watchdog | None = None) -> ClosedLoopStats:
    return play("pydantic-ai", scenario, detector, watch)


def _pydantic_ai(run: ScriptedRun) -> None:
    from pydantic_ai import Agent, ModelRetry, UsageLimits
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import FunctionToolset

    from adapters import LoopHalted
    from adapters.pydantic_ai import LoopGuardToolset

    def respond(messages, info):
        shown = {p.tool_call_id: str(p.content) for p in messages[-1].parts if isinstance(p, ToolReturnPart)}
        reply = run.respond(shown)
        return ModelResponse(parts=[TextPart(reply.thought)] + [ToolCallPart(t, a, tool_call_id=i)
                                                                 for i, t, a in reply.calls])

    def world_tool(name: str) -> Tool:
        def call(ctx, **args):
            obs = run.run_tool(ctx.tool_call_id, name, args)
            if obs.error:  # pydantic-ai's way for a tool to report a failure to the model
                raise ModelRetry(obs.content)
            return obs.content
        # Sequential: the calls of one turn hit the world in order, as in the built-in harness.
        return Tool.from_schema(call, name, f"world tool {name}", {"type": "object", "additionalProperties": True},
                                takes_ctx=True, sequential=True)

    # Retries unbounded here: the persona, not pydantic-ai's retry budget, decides when to stop.
    toolset: Any = FunctionToolset([world_tool(n) for n in run.tools], max_retries=10_000)
    if run.detector is not None:
        toolset = LoopGuardToolset(toolset, factory=run.guard)
    agent = Agent(FunctionModel(respond), toolsets=[toolset])
    try:
        agent.run_sync(run.scenario.id, usage_limits=UsageLimits(request_limit=run.request_limit))
    except LoopHalted as halt:
        run.halted(str(halt.decision.verdict))


def _openai_agents(run: ScriptedRun) -> None:
    import json

    from agents import Agent, FunctionTool, Model, ModelResponse, RunConfig, Runner, ToolInputGuardrailTripwireTriggered, Usage
    from agents.testing import assistant_message, function_call

    from adapters.openai_agents import guard_tools

    class PersonaModel(Model):
        """The persona as an Agents SDK model: it reads the tool outputs in its input."""

        async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                               tracing, **kwargs):
            items = input if isinstance(input, list) else []
            shown = {i["call_id"]: str(i["output"]) for i in items
                     if isinstance(i, dict) and i.get("type") == "function_call_output"}
            reply = run.respond(shown)
            out = [assistant_message(reply.thought, item_id=f"m{run.turn_no}")] if reply.thought or reply.final else []
            out += [function_call(t, a, call_id=i) for i, t, a in reply.calls]
            return ModelResponse(output=out, usage=Usage(requests=1), response_id=None)  # one request, as a model reports

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("the scripted persona answers whole responses only")

    def world_tool(name: str) -> FunctionTool:
        async def invoke(ctx, args_json: str) -> str:
            # A failed call's text is its output: the SDK has no error status for a function tool.
            return run.run_tool(ctx.tool_call_id, name, json.loads(args_json or "{}")).content
        return FunctionTool(name=name, description=f"world tool {name}", on_invoke_tool=invoke,
                            params_json_schema={"type": "object", "additionalProperties": True}, strict_json_schema=False)

    tools = [world_tool(n) for n in run.tools]
    if run.detector is not None:
        tools = guard_tools(tools, factory=run.guard)
    agent = Agent(name=run.scenario.family, model=PersonaModel(), tools=tools)
    try:
        asyncio.run(Runner.run(agent, run.scenario.id, max_turns=run.request_limit,
                               run_config=RunConfig(tracing_disabled=True)))
    except ToolInputGuardrailTripwireTriggered as trip:
        run.halted(str((trip.output.output_info or {}).get("verdict", "stop")))


def _langchain(run: ScriptedRun) -> None:
    from typing import Annotated

    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import InjectedToolCallId, StructuredTool, ToolException
    from pydantic import BaseModel, ConfigDict

    from adapters import LoopHalted
    from adapters.langchain import LoopGuardMiddleware

    class PersonaChat(BaseChatModel):
        """The persona as a LangChain chat model: it reads the ``ToolMessage``s it was sent."""

        @property
        def _llm_type(self) -> str:
            return "loopbench-persona"

        def bind_tools(self, tools, **kwargs):  # the persona knows its tools
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            shown = {m.tool_call_id: m.content if isinstance(m.content, str) else str(m.content)
                     for m in messages if isinstance(m, ToolMessage)}
            reply = run.respond(shown)
            msg = AIMessage(content=reply.thought,
                            tool_calls=[{"name": t, "args": a, "id": i, "type": "tool_call"} for i, t, a in reply.calls])
            return ChatResult(generations=[ChatGeneration(message=msg)])

    class AnyArgs(BaseModel):
        model_config = ConfigDict(extra="allow")
        call_id: Annotated[str, InjectedToolCallId]

    def world_tool(name: str) -> StructuredTool:
        async def call(call_id: str, **args: Any) -> str:
            obs = run.run_tool(call_id, name, args)
            if obs.error:  # shown as a ToolMessage with status="error"
                raise ToolException(obs.content)
            return obs.content
        return StructuredTool.from_function(coroutine=call, name=name, description=f"world tool {name}",
                                            args_schema=AnyArgs, handle_tool_error=True)

    middleware = [LoopGuardMiddleware(run.guard)] if run.detector is not None else []
    agent = create_agent(PersonaChat(), [world_tool(n) for n in run.tools], middleware=middleware)
    try:
        # Each model request is two graph steps (model, tools), a few more with middleware.
        asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": run.scenario.id}]},
                                  {"recursion_limit": 4 * run.request_limit}))
    except LoopHalted as halt:
        run.halted(str(halt.decision.verdict))


PLAYERS: dict[str, Callable[[ScriptedRun], None]] = {
    "pydantic-ai": _pydantic_ai, "openai-agents": _openai_agents, "langchain": _langchain}
