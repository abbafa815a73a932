"""OpenAI Agents SDK: the guard as a tool input guardrail plus a tool output guardrail.

>>> # agent = Agent(name="a", model=model, tools=guard_tools([search, fetch]))

The input guardrail answers before each call: ``allow``; ``reject_content`` with the guard's
nudge (the model sees it in place of the tool's output); or ``raise_exception``, the SDK's
tripwire (``ToolInputGuardrailTripwireTriggered`` out of ``Runner.run``; its
``output.output_info`` holds the guard's verdict and reason). The output guardrail records
what the tool returned. Each run gets its own guard: the SDK gives every tool call of one
run the run's ``Usage`` object, so the guard is kept per that object and dropped with it.
"""
from __future__ import annotations

import json
import weakref
from typing import Any, Iterable

from agents import FunctionTool, ToolGuardrailFunctionOutput, ToolInputGuardrail, ToolOutputGuardrail
from agents.tool_guardrails import ToolInputGuardrailData, ToolOutputGuardrailData

from detectors.guard import LoopGuard

from .core import GuardFactory, LoopHalted, after, before, guard_factory


class AgentsLoopGuard:
    """One guard per run for the tools it is installed on (``guard_tools`` installs it)."""

    def __init__(self, factory: GuardFactory | None = None):
        self.factory = factory or guard_factory()
        self._guards: dict[int, LoopGuard] = {}
        self._pending: dict[str, Any] = {}  # call id -> the decision that let it run
        self.input = ToolInputGuardrail(self._check, name="loopbench_loop_guard")
        self.output = ToolOutputGuardrail(self._record, name="loopbench_loop_guard_record")

    def guard_for(self, run_usage: Any) -> LoopGuard:
        key = id(run_usage)
        guard = self._guards.get(key)
        if guard is None:
            guard = self._guards[key] = self.factory()
            weakref.finalize(run_usage, self._guards.pop, key, None)
        return guard

    def _check(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        guard = self.guard_for(ctx.usage)
        try:
            action = before(guard, ctx.tool_name, _args(ctx.tool_arguments), _turn(ctx))
        except LoopHalted as halt:
            return ToolGuardrailFunctionOutput.raise_exception(
                output_info={"verdict": str(halt.decision.verdict), "reason": halt.reason})
        if not action.run:
            return ToolGuardrailFunctionOutput.reject_content(
                action.message, output_info={"verdict": str(action.decision.verdict)})
        self._pending[ctx.tool_call_id] = action.decision
        return ToolGuardrailFunctionOutput.allow()

    def _record(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        decision = self._pending.pop(ctx.tool_call_id, None)
        after(self.guard_for(ctx.usage), ctx.tool_name, _args(ctx.tool_arguments), data.output,
              decision=decision, turn=_turn(ctx))
        return ToolGuardrailFunctionOutput.allow()


def guard_tools(tools: Iterable[FunctionTool], factory: GuardFactory | None = None,
                guard: AgentsLoopGuard | None = None) -> list[FunctionTool]:
    """The tools, each with the loop guard's input and output guardrails added (in place)."""
    guard = guard or AgentsLoopGuard(factory)
    out = []
    for tool in tools:
        tool.tool_input_guardrails = [*(tool.tool_input_guardrails or []), guard.input]
        tool.tool_output_guardrails = [*(tool.tool_output_guardrails or []), guard.output]
        out.append(tool)
    return out


def _turn(ctx: Any) -> int | None:
    """The model response that proposed the call: the run's model requests so far, as the
    models report them (a model that reports none: unknown, each call its own turn)."""
    return getattr(ctx.usage, "requests", None) or None


def _args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_value": value}
