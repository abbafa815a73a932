"""The guard inside the OpenAI Agents SDK's real run loop, with its ScriptedModel."""
from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, ToolInputGuardrailTripwireTriggered, function_tool  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

from adapters import guard_factory  # noqa: E402
from adapters.openai_agents import AgentsLoopGuard, guard_tools  # noqa: E402

from .scripts import HEALTHY, LOOPING, PAIR, World, tool_functions  # noqa: E402

QUIET = RunConfig(tracing_disabled=True)


def tools(world: World):
    return [function_tool(f) for f in tool_functions(world)]


def scripted(script, first_delay: float = 0.0) -> ScriptedModel:
    steps = [[function_call(t, a, call_id=f"c{i}")] for i, (t, a) in enumerate(script)]
    steps.append([assistant_message("done")])
    if first_delay:
        first = steps[0]

        async def late(call):
            await asyncio.sleep(first_delay)
            return first

        steps[0] = ModelStep.respond(late)
    return ScriptedModel(steps)


def outputs(model: ScriptedModel) -> list[str]:
    """What the model was shown as tool outputs, from the input of its last call."""
    last = model.calls[-1].input
    return [item["output"] for item in last if isinstance(item, dict) and item.get("type") == "function_call_output"]


def test_a_looping_agent_is_nudged_then_halted():
    world, model = World(), scripted(LOOPING)
    agent = Agent(name="looper", model=model, tools=guard_tools(tools(world)))
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as trip:
        asyncio.run(Runner.run(agent, "find q3 revenue", run_config=QUIET))
    assert world.ran == [("search", "q3 revenue")]
    seen = outputs(model)
    assert seen[0] == "no results" and seen[1].startswith("Loop guard:")  # reject_content = the nudge
    info = trip.value.output.output_info
    assert info["verdict"] == "stop" and "returned nothing new" in info["reason"]


def test_a_healthy_agent_is_not_touched():
    world, model = World(), scripted(HEALTHY)
    agent = Agent(name="healthy", model=model, tools=guard_tools(tools(world)))
    result = asyncio.run(Runner.run(agent, "find q3 revenue", run_config=QUIET))
    assert result.final_output == "done"
    assert world.ran == [(t, next(iter(a.values()))) for t, a in HEALTHY]
    assert not any("Loop guard" in o for o in outputs(model))


def test_a_tuned_registered_detector(tmp_path):
    cfg = tmp_path / "tuned.toml"
    cfg.write_text("[detectors.exact]\nmax_repeats_per_signature = 3\n")
    world, model = World(), scripted(LOOPING)
    agent = Agent(name="looper", model=model,
                  tools=guard_tools(tools(world), factory=guard_factory("exact", config=cfg)))
    asyncio.run(Runner.run(agent, "go", run_config=QUIET))  # exact prunes, it never stops
    assert world.ran == [("search", "q3 revenue")] * 3
    # exact prunes without a message: the model is told the call was not run
    assert sum(o.startswith("[loop guard] call not run") for o in outputs(model)) == len(LOOPING) - 3


def test_two_concurrent_runs_never_share_a_guard():
    world = World(delay=0.02)
    guard = AgentsLoopGuard()
    shared = guard_tools(tools(world), guard=guard)
    a = Agent(name="a", model=scripted(PAIR), tools=shared)
    b = Agent(name="b", model=scripted(PAIR, first_delay=0.03), tools=shared)

    async def both():
        return await asyncio.gather(Runner.run(a, "a", run_config=QUIET), Runner.run(b, "b", run_config=QUIET))

    ra, rb = asyncio.run(both())
    assert ra.final_output == rb.final_output == "done"
    assert sorted(world.ran) == [("fetch", "D1")] * 2 + [("search", "q3 revenue")] * 2
    assert not any("Loop guard" in o for o in outputs(a.model) + outputs(b.model))
    assert guard._guards == {} or len(guard._guards) <= 2  # per-run guards, dropped with their runs
