"""The guard inside a LangChain 1.x agent (LangGraph), with LangChain's fake chat model."""
from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from adapters import LoopHalted, guard_factory  # noqa: E402
from adapters.langchain import LoopGuardMiddleware  # noqa: E402

from .scripts import HEALTHY, LOOPING, PAIR, World, tool_functions  # noqa: E402


class ScriptedChat(GenericFakeChatModel):
    """LangChain's GenericFakeChatModel; an agent binds tools to it, which it ignores."""

    def bind_tools(self, tools, **kwargs):
        return self


def scripted(script) -> ScriptedChat:
    steps = [AIMessage(content="", tool_calls=[{"name": t, "args": a, "id": f"c{i}"}])
             for i, (t, a) in enumerate(script)]
    return ScriptedChat(messages=iter(steps + [AIMessage(content="done")]))


def tools(world: World):
    return [tool(f) for f in tool_functions(world)]


def tool_texts(messages) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolMessage)]


def test_a_looping_agent_is_nudged_then_halted():
    world, seen = World(), []
    mw = LoopGuardMiddleware()
    agent = create_agent(scripted(LOOPING), tools(world), middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    with pytest.raises(LoopHalted) as halt:
        asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "find q3 revenue"}]}, config))
    assert world.ran == [("search", "q3 revenue")]
    seen = tool_texts(agent.get_state(config).values["messages"])
    assert seen[0] == "no results" and seen[1].startswith("Loop guard:")  # the nudge as a ToolMessage
    assert halt.value.tool == "search" and str(halt.value.decision.verdict) == "stop"


def test_a_healthy_agent_is_not_touched():
    world = World()
    agent = create_agent(scripted(HEALTHY), tools(world), middleware=[LoopGuardMiddleware()])
    out = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "find q3 revenue"}]}))
    assert out["messages"][-1].content == "done"
    assert world.ran == [(t, next(iter(a.values()))) for t, a in HEALTHY]
    assert not any("Loop guard" in t for t in tool_texts(out["messages"]))


def test_a_tuned_registered_detector_sync(tmp_path):
    cfg = tmp_path / "tuned.toml"
    cfg.write_text("[detectors.exact]\nmax_repeats_per_signature = 3\n")
    world = World()

    @tool
    def search(query: str) -> str:
        """Search the documents."""
        return world.answer("search", query)

    mw = LoopGuardMiddleware(guard_factory("exact", config=cfg))
    agent = create_agent(scripted(LOOPING), [search], middleware=[mw])
    out = agent.invoke({"messages": [{"role": "user", "content": "go"}]})  # exact prunes, never stops
    assert world.ran == [("search", "q3 revenue")] * 3
    texts = tool_texts(out["messages"])
    assert len(texts) == len(LOOPING) and sum(t.startswith("[loop guard] call not run") for t in texts) == 5


@pytest.mark.parametrize("threads", [True, False])
def test_two_concurrent_runs_never_share_a_guard(threads):
    world = World(delay=0.02)
    mw = LoopGuardMiddleware()
    saver = InMemorySaver() if threads else None
    a = create_agent(scripted(PAIR), tools(world), middleware=[mw], checkpointer=saver)
    b = create_agent(scripted(PAIR), tools(world), middleware=[mw], checkpointer=saver)

    async def run(agent, name, delay):
        await asyncio.sleep(delay)
        config = {"configurable": {"thread_id": name}} if threads else None
        return await agent.ainvoke({"messages": [{"role": "user", "content": name}]}, config)

    async def both():
        return await asyncio.gather(run(a, "a", 0), run(b, "b", 0.03))

    ra, rb = asyncio.run(both())
    assert sorted(world.ran) == [("fetch", "D1")] * 2 + [("search", "q3 revenue")] * 2
    assert not any("Loop guard" in t for t in tool_texts(ra["messages"]) + tool_texts(rb["messages"]))
    assert len(mw._guards) == 2


def test_each_call_is_checked_and_recorded_under_the_turn_of_the_response_that_proposed_it():
    from detectors.exact import ExactDetector
    from detectors.guard import LoopGuard

    seen: list[tuple[str, str, int | None]] = []

    class Watched(ExactDetector):
        def check(self, state, call):
            seen.append(("check", call.tool, call.turn))
            return super().check(state, call)

        def record(self, state, call, decision, observation):
            seen.append(("record", call.tool, call.turn))
            return super().record(state, call, decision, observation)

    agent = create_agent(scripted(HEALTHY), tools(World()), middleware=[LoopGuardMiddleware(lambda: LoopGuard(Watched()))])
    asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "find q3 revenue"}]}))  # the tools are async
    # One AI message per step of the script: the k-th call comes from the k-th response.
    assert seen == [(step, t, k) for k, (t, _) in enumerate(HEALTHY, 1) for step in ("check", "record")]
