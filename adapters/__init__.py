"""Loop guards installed at the documented hooks of agent frameworks (SPEC §12).

- ``adapters.pydantic_ai``: a ``WrapperToolset`` (pydantic-ai);
- ``adapters.openai_agents``: tool input/output guardrails (OpenAI Agents SDK);
- ``adapters.langchain``: agent middleware with ``wrap_tool_call`` (LangChain 1.x on LangGraph).

Each maps the guard's verdicts the same way (``adapters.core``): allow runs the tool and
records its result; nudge (and prune) returns the guard's message to the model in place of
the result; stop and escalate end the run with ``LoopHalted`` carrying the guard's reason.
The frameworks are an optional extra: ``pip install 'loopbench[frameworks]'``.
"""
from .core import GuardFactory, LoopHalted, guard_factory

__all__ = ["GuardFactory", "LoopHalted", "guard_factory"]
