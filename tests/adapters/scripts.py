"""Scripted agents for the adapter tests: what each calls, and the world its tools answer from.

Each framework's own scripted model plays these (pydantic-ai ``FunctionModel``, the Agents
SDK's ``ScriptedModel``, a LangChain fake chat model); the tools are the framework's tools.
"""
from __future__ import annotations

import asyncio

LOOPING = [("search", {"query": "q3 revenue"})] * 8  # the same call, the same empty answer
HEALTHY = [("search", {"query": "q3 revenue"}), ("search", {"query": "q3 revenue by region"}),
           ("fetch", {"doc": "D2"})]
PAIR = [("search", {"query": "q3 revenue"}), ("fetch", {"doc": "D1"})]  # run twice at once

ANSWERS = {
    ("search", "q3 revenue by region"): "2 results: [D2] EMEA 41%, [D3] APAC 22%",
    ("fetch", "D1"): "Revenue Q3: 4.2M",
    ("fetch", "D2"): "EMEA 41%, APAC 22%, Americas 37%",
}


class World:
    """The tools' side: answers, and a log of every call that really ran."""

    def __init__(self, delay: float = 0.0):
        self.ran: list[tuple[str, str]] = []
        self.delay = delay

    def answer(self, tool: str, key: str) -> str:
        self.ran.append((tool, key))
        return ANSWERS.get((tool, key), "no results")

    async def aanswer(self, tool: str, key: str) -> str:
        await asyncio.sleep(self.delay)
        return self.answer(tool, key)


def tool_functions(world: World):
    """The two tools as plain async functions, for each framework's own tool decorator."""

    async def search(query: str) -> str:
        """Search the documents."""
        return await world.aanswer("search", query)

    async def fetch(doc: str) -> str:
        """Fetch one document."""
        return await world.aanswer("fetch", doc)

    return [search, fetch]
