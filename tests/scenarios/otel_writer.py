"""Write OTLP JSON trace files with the real OpenTelemetry SDK and its JSON file exporter.

Tests describe an agent run as nested steps; this module turns them into spans with
explicit start/end times (so ordering and overlap are deterministic) and lets the SDK's
``FileSpanExporter`` write the file, exactly as a user's instrumented agent would.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.exporter.otlp.json.file")

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.json.file import FileSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.trace import Status, StatusCode  # noqa: E402

T0 = 1_800_000_000_000_000_000  # a fixed epoch in ns: files are reproducible up to ids


@dataclass
class Tool:
    """One tool execution; ``start``/``end`` in ms after the trace start."""

    name: str
    args: Any
    start: int
    end: int
    result: Any = None
    error: str | None = None
    call_id: str | None = None
    children: list["Agent | Tool"] = field(default_factory=list)  # agent as a tool


@dataclass
class Agent:
    name: str
    start: int
    end: int
    steps: list["Agent | Tool | Chat"] = field(default_factory=list)
    status: str | None = None  # "ok" | "error": how the run ended, as a harness sets it


@dataclass
class Chat:
    """A model call; in the ≤ v1.36 naming its tool calls travel as a ``gen_ai.choice`` event."""

    start: int
    end: int
    tool_calls: list[tuple[str, str, dict]] = field(default_factory=list)  # (id, name, args)
    tool_results: list[tuple[str, str]] = field(default_factory=list)  # (id, content) sent to the model
    usage: tuple[int, int] | None = None  # (input, output) tokens: gen_ai.usage.*


def write_otlp(path: Path, traces: list[Agent], generation: str = "current", results: bool = True) -> Path:
    """Export ``traces`` (one root agent each) to ``path`` as the SDK's OTLP JSON Lines.

    ``generation``: ``current`` (``gen_ai.tool.call.arguments`` / ``.result``) or ``v1.36``
    (no content attributes; the model's tool calls and the tool replies are span events).
    """
    provider = TracerProvider()
    exporter = FileSpanExporter(path)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("loopbench-tests")

    def ns(ms: int) -> int:
        return T0 + ms * 1_000_000

    def emit(step: Agent | Tool | Chat, ctx) -> None:
        if isinstance(step, Agent):
            span = tracer.start_span(f"invoke_agent {step.name}", context=ctx, start_time=ns(step.start))
            span.set_attribute("gen_ai.operation.name", "invoke_agent")
            span.set_attribute("gen_ai.agent.name", step.name)
            inner = trace.set_span_in_context(span)
            for s in step.steps:
                emit(s, inner)
            if step.status == "ok":
                span.set_status(Status(StatusCode.OK))
            elif step.status == "error":
                span.set_status(Status(StatusCode.ERROR, "run failed"))
            span.end(end_time=ns(step.end))
        elif isinstance(step, Chat):
            span = tracer.start_span("chat gpt-test", context=ctx, start_time=ns(step.start))
            span.set_attribute("gen_ai.operation.name", "chat")
            if step.usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", step.usage[0])
                span.set_attribute("gen_ai.usage.output_tokens", step.usage[1])
            if generation == "v1.36":
                span.set_attribute("gen_ai.system", "openai")
                for cid, content in step.tool_results if results else []:
                    span.add_event("gen_ai.tool.message", {"gen_ai.system": "openai", "id": cid, "content": content})
                if step.tool_calls:
                    calls = [{"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                             for cid, n, a in step.tool_calls]
                    span.add_event("gen_ai.choice", {"gen_ai.system": "openai", "index": 0,
                                                     "gen_ai.event.content": json.dumps({"message": {"tool_calls": calls}})})
            span.end(end_time=ns(step.end))
        else:
            span = tracer.start_span(f"execute_tool {step.name}", context=ctx, start_time=ns(step.start))
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", step.name)
            if step.call_id:
                span.set_attribute("gen_ai.tool.call.id", step.call_id)
            if generation == "current":
                span.set_attribute("gen_ai.tool.call.arguments",
                                   step.args if isinstance(step.args, str) else json.dumps(step.args))
                if results and step.result is not None:
                    span.set_attribute("gen_ai.tool.call.result",
                                       step.result if isinstance(step.result, str) else json.dumps(step.result))
            else:
                span.set_attribute("gen_ai.system", "openai")  # content went to the Chat events
            if step.error:
                span.set_attribute("error.type", "ToolError")
                span.set_status(Status(StatusCode.ERROR, step.error))
            inner = trace.set_span_in_context(span)
            for s in step.children:
                emit(s, inner)
            span.end(end_time=ns(step.end))

    for root in traces:
        emit(root, None)
    provider.shutdown()
    return path
