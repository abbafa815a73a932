"""LangChain 1.x agents (on LangGraph): the guard as agent middleware with ``wrap_tool_call``.

>>> # agent = create_agent(model, tools, middleware=[LoopGuardMiddleware()])

Allow runs the tool (``handler(request)``) and records its ``ToolMessage``; a nudge returns a
``ToolMessage`` holding the guard's message instead of running the tool; a halt raises
``LoopHalted`` out of ``invoke``/``ainvoke`` (as ``ToolCallLimitMiddleware`` does with
``exit_behavior="error"``). State follows the conversation: the guard is kept per thread
(``configurable.thread_id``) or, without one, per the conversation's first message, which
LangGraph gives a fresh id on every new conversation.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, ToolMessage

from detectors.guard import LoopGuard

from .core import Action, GuardFactory, after, before, guard_factory


class LoopGuardMiddleware(AgentMiddleware):
    """Agent middleware: every tool call passes the loop guard before it runs."""

    def __init__(self, factory: GuardFactory | None = None):
        super().__init__()
        self.factory = factory or guard_factory()
        self._guards: dict[str, LoopGuard] = {}

    def guard_for(self, request: Any) -> LoopGuard:
        key = _conversation(request)
        guard = self._guards.get(key)
        if guard is None:
            guard = self._guards[key] = self.factory()
        return guard

    def _before(self, request: Any) -> tuple[LoopGuard, Action, int]:
        """The guard's action on the call, and its turn: counted once, running the tool adds
        no AI message to the request's state."""
        guard = self.guard_for(request)
        call = request.tool_call
        turn = _turn(request)
        return guard, before(guard, call["name"], call.get("args") or {}, turn), turn

    def _after(self, guard: LoopGuard, request: Any, action: Action, turn: int, result: Any) -> Any:
        call = request.tool_call
        if isinstance(result, ToolMessage):
            after(guard, call["name"], call.get("args") or {}, _text(result.content),
                  error=result.status == "error", decision=action.decision, turn=turn)
        else:  # a Command: the tool ran, its result is not a message we can read
            after(guard, call["name"], call.get("args") or {}, None, decision=action.decision, turn=turn)
        return result

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        guard, action, turn = self._before(request)
        if not action.run:
            return _nudge(request, action)
        return self._after(guard, request, action, turn, handler(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        guard, action, turn = self._before(request)
        if not action.run:
            return _nudge(request, action)
        return self._after(guard, request, action, turn, await handler(request))


def _nudge(request: Any, action: Action) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=action.message, tool_call_id=call["id"], name=call["name"])


def _messages(request: Any) -> list:
    state = request.state
    return (state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)) or []


def _turn(request: Any) -> int:
    """The model response that proposed the call: the AI messages so far in the conversation."""
    return sum(isinstance(m, AIMessage) for m in _messages(request))


def _conversation(request: Any) -> str:
    config = getattr(request.runtime, "config", None) or {}
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is not None:
        return f"thread:{thread}"
    messages = _messages(request)
    first = messages[0] if messages else None
    return f"message:{getattr(first, 'id', None) or id(first)}"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p if isinstance(p, str) else str(p.get("text", p)) if isinstance(p, dict) else str(p)
                       for p in content)
    return str(content)
