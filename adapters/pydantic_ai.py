"""pydantic-ai: the guard as a ``WrapperToolset`` around the agent's tools.

>>> # agent = Agent(model, toolsets=[LoopGuardToolset(my_toolset)])

``for_run`` (pydantic-ai calls it once per agent run) gives each run its own guard, so two
concurrent runs of one agent never share a guard's memory. A nudge returns the guard's
message as the tool's result (or raises ``ModelRetry`` with it, ``nudge_as="retry"``,
which counts against the tool's retries); a halt raises ``LoopHalted`` out of ``agent.run``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import ModelRetry
from pydantic_ai.toolsets import WrapperToolset

from detectors.guard import LoopGuard

from .core import GuardFactory, after, before, guard_factory


@dataclass
class LoopGuardToolset(WrapperToolset):
    """Wraps a toolset: every call passes the loop guard before it runs."""

    factory: GuardFactory = field(default_factory=guard_factory)
    nudge_as: str = "result"  # or "retry": ModelRetry(message)
    guard: LoopGuard | None = None  # this run's guard (set by for_run)

    async def for_run(self, ctx: Any) -> "LoopGuardToolset":
        wrapped = await self.wrapped.for_run(ctx)
        return replace(self, wrapped=wrapped, guard=self.factory())

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        guard = self.guard
        if guard is None:  # called outside agent.run (no for_run): one guard for this toolset
            guard = self.guard = self.factory()
        turn = getattr(ctx, "run_step", None)  # the model response that proposed the call
        action = before(guard, name, tool_args, turn)
        if not action.run:
            if self.nudge_as == "retry":
                raise ModelRetry(action.message)
            return action.message
        try:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except ModelRetry as exc:
            after(guard, name, tool_args, str(exc), error=True, decision=action.decision, turn=turn)
            raise
        after(guard, name, tool_args, result, decision=action.decision, turn=turn)
        return result
