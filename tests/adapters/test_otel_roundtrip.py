"""Each framework's own OpenTelemetry output, exported as OTLP JSON by the real SDK, imports back
(`loopbench import --format otel`) as the episode that was played: tools, arguments, results, order.

pydantic-ai: its built-in instrumentation (the ``Instrumentation`` capability). The Agents SDK
and LangChain: OpenInference's instrumentors (``openinference-instrumentation-openai-agents``,
``-langchain``), which turn each framework's own tracing into OTel spans.
"""
from __future__ import annotations

import asyncio
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.json.file")

from click.testing import CliRunner  # noqa: E402
from opentelemetry.exporter.otlp.json.file import FileSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from scenarios.trace import read_trace  # noqa: E402
from sim.cli import main  # noqa: E402

from .scripts import ANSWERS, HEALTHY, World  # noqa: E402


def provider(path: Path) -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    return tp


@contextmanager
def instrumented(path: Path, instrumentor, **options):
    """An OpenInference instrumentor writing to ``path`` for the length of the block."""
    tp = provider(path)
    instrumentor.instrument(tracer_provider=tp, **options)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        tp.shutdown()


def imported(path: Path, tmp_path: Path):
    out = tmp_path / "imported.jsonl"
    r = CliRunner().invoke(main, ["import", "--format", "otel", str(path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    [ep] = read_trace(out).episodes
    return [(n.call.tool, n.call.args, n.observation.content if n.observation.recorded else None)
            for n in ep.nodes], r.output


def played(world: World, script) -> list[tuple[str, dict, str]]:
    """What ran, as the tools answered it (the world's log, in order)."""
    assert [(t, next(iter(a.values()))) for t, a in script] == world.ran
    return [(t, a, ANSWERS.get((t, next(iter(a.values()))), "no results")) for t, a in script]


def pydantic_run(tmp_path: Path, include_content: bool = True):
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from adapters.pydantic_ai import LoopGuardToolset

    from .test_pydantic_ai import run_messages, scripted, toolset

    path, world = tmp_path / "pydantic-ai.otlp.jsonl", World()
    tp = provider(path)
    settings = InstrumentationSettings(tracer_provider=tp, include_content=include_content)
    agent = Agent(scripted(HEALTHY), toolsets=[LoopGuardToolset(toolset(world))],
                  capabilities=[Instrumentation(settings=settings)])
    _, halt = run_messages(agent)
    tp.shutdown()
    assert halt is None
    return path, world


def test_pydantic_ai_round_trip(tmp_path):
    path, world = pydantic_run(tmp_path)
    calls, _ = imported(path, tmp_path)
    assert calls == played(world, HEALTHY)


def test_pydantic_ai_without_content_imports_the_calls_and_says_what_is_missing(tmp_path):
    path, world = pydantic_run(tmp_path, include_content=False)
    calls, said = imported(path, tmp_path)
    assert [c[0] for c in calls] == [t for t, _ in HEALTHY]  # the calls, in order
    assert all(c[2] is None for c in calls)  # no results recorded
    assert "3 of 3 tool calls have no recorded result" in said and "docs/traces.md" in said


def test_openai_agents_round_trip_through_openinference(tmp_path):
    pytest.importorskip("agents")
    oi = pytest.importorskip("openinference.instrumentation.openai_agents")
    from agents import Agent, Runner

    from adapters.openai_agents import guard_tools

    from .test_openai_agents import scripted, tools

    path, world = tmp_path / "agents.otlp.jsonl", World()
    # exclusive: OpenInference's processor replaces the SDK's default exporter to OpenAI
    with instrumented(path, oi.OpenAIAgentsInstrumentor(), exclusive_processor=True):
        agent = Agent(name="healthy", model=scripted(HEALTHY), tools=guard_tools(tools(world)))
        assert asyncio.run(Runner.run(agent, "find q3 revenue")).final_output == "done"
    calls, _ = imported(path, tmp_path)
    assert calls == played(world, HEALTHY)


def test_langchain_round_trip_through_openinference(tmp_path):
    pytest.importorskip("langchain.agents")
    oi = pytest.importorskip("openinference.instrumentation.langchain")
    from langchain.agents import create_agent

    from adapters.langchain import LoopGuardMiddleware

    from .test_langchain import scripted, tools

    path, world = tmp_path / "langchain.otlp.jsonl", World()
    with instrumented(path, oi.LangChainInstrumentor()):
        agent = create_agent(scripted(HEALTHY), tools(world), middleware=[LoopGuardMiddleware()])
        out = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "find q3 revenue"}]}))
        assert out["messages"][-1].content == "done"
    calls, _ = imported(path, tmp_path)
    assert calls == played(world, HEALTHY)
