"""The guard inside pydantic-ai's real agent loop, with its scripted FunctionModel."""
from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, capture_run_messages  # noqa: E402
from pydantic_ai.messages import ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import FunctionModel  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

from adapters import LoopHalted, guard_factory  # noqa: E402
from adapters.pydantic_ai import LoopGuardToolset  # noqa: E402

from .scripts import HEALTHY, LOOPING, PAIR, World, tool_functions  # noqa: E402


def toolset(world: World) -> FunctionToolset:
    return FunctionToolset(tool_functions(world))


def scripted(script, first_delay: float = 0.0) -> FunctionModel:
    async def respond(messages, info):
        n = sum(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
        if n == 0 and first_delay:
            await asyncio.sleep(first_delay)
        if n >= len(script):
            return ModelResponse(parts=[TextPart("done")])
        tool, args = script[n]
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=f"c{n}")])

    return FunctionModel(respond)


def returns(messages) -> list[str]:
    return [str(p.content) for m in messages for p in m.parts if isinstance(p, (ToolReturnPart, RetryPromptPart))]


def run_messages(agent, prompt="find q3 revenue"):
    """The run's messages, and the LoopHalted that ended it (or None)."""
    with capture_run_messages() as messages:
        try:
            agent.run_sync(prompt)
        except LoopHalted as exc:
            return messages, exc
    return messages, None


def test_a_looping_agent_is_nudged_then_halted():
    world = World()
    agent = Agent(scripted(LOOPING), toolsets=[LoopGuardToolset(toolset(world))])
    messages, halt = run_messages(agent)
    assert world.ran == [("search", "q3 revenue")]  # only the first call ran
    seen = returns(messages)
    assert seen[0] == "no results"
    assert seen[1].startswith("Loop guard:")  # the nudge, as the second call's result
    assert halt is not None and halt.tool == "search"
    assert "returned nothing new" in halt.reason and str(halt.decision.verdict) == "stop"


def test_nudge_as_model_retry():
    world = World()
    agent = Agent(scripted(LOOPING), toolsets=[LoopGuardToolset(toolset(world), nudge_as="retry")])
    messages, halt = run_messages(agent)
    # this pydantic-ai shows a ModelRetry as the call's return part, marked retried
    retries = [p for m in messages for p in m.parts
               if isinstance(p, RetryPromptPart) or getattr(p, "outcome", None) == "retried"]
    assert len(retries) == 1 and "Loop guard:" in str(retries[0].content)
    assert halt is not None and world.ran == [("search", "q3 revenue")]


def test_a_healthy_agent_is_not_touched():
    world = World()
    agent = Agent(scripted(HEALTHY), toolsets=[LoopGuardToolset(toolset(world))])
    messages, halt = run_messages(agent)
    assert halt is None
    assert world.ran == [(t, next(iter(a.values()))) for t, a in HEALTHY]
    assert not any("Loop guard" in r for r in returns(messages))


def test_any_registered_detector_with_a_tuned_config(tmp_path):
    cfg = tmp_path / "tuned.toml"
    cfg.write_text("[detectors.exact]\nmax_repeats_per_signature = 3\n")
    world = World()
    ts = LoopGuardToolset(toolset(world), factory=guard_factory("exact", config=cfg))
    messages, halt = run_messages(Agent(scripted(LOOPING), toolsets=[ts]))
    # exact with max 3 repeats lets three identical calls run before it acts
    assert world.ran == [("search", "q3 revenue")] * 3
    with pytest.raises(Exception, match="unknown detector"):
        guard_factory("no_such_detector")


def test_two_concurrent_runs_never_share_a_guard():
    world = World(delay=0.02)
    agent = Agent(scripted(PAIR), toolsets=[LoopGuardToolset(toolset(world))])
    agent_late = Agent(scripted(PAIR, first_delay=0.03), toolsets=agent.toolsets)

    async def both():
        with capture_run_messages() as first:
            task = asyncio.create_task(agent.run("a"))
            await asyncio.sleep(0)
        with capture_run_messages() as second:
            await agent_late.run("b")
        await task
        return first, second

    first, second = asyncio.run(both())
    # the late run's first call came after the first run had recorded the same call (and
    # while that run was still going): a shared guard would have nudged it
    assert sorted(world.ran) == [("fetch", "D1")] * 2 + [("search", "q3 revenue")] * 2
    assert world.ran[0] == ("search", "q3 revenue") and world.ran[-1] == ("fetch", "D1")
    assert not any("Loop guard" in r for r in returns(first) + returns(second))
