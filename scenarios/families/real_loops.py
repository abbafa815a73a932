"""Looping families modelled on the loops real traces show most (SPEC §10).

- ``search_dead_end``: look-ups reworded over the same subject, each failing with the
  suggestions already seen (ReAct re-searching a title in new words);
- ``rerun_code``: the same code run again, at most cosmetically edited, for the same
  output (code-running agents);
- ``scroll_stall``: scrolling on at the end of a page, the same last screen each time
  (web agents);
- ``redelegate``: an orchestrator re-issuing a fulfilled request in new words; the
  sub-agent does not answer again (Magentic-One).

Like every looping family they run over linear paths and branching trees
(``loops.build_looping``).
"""
from __future__ import annotations

import random
from typing import Any

from detectors.protocol import ToolCall

from ..base import Scenario, family
from ..text import paraphrase, render
from ..worldtools import request_key, viewports
from .builder import CONCEPT_NAMES, PathBuilder, ScriptError, loop_length
from .loops import COMMON, Stuck, build_looping

#: Real loops run for a handful of repeats before the agent or its budget gives up (the
#: ReAct traces halt after a few, Magentic-One re-delegates five to ten times), not 30-50.
REAL = {**COMMON, "loop_length": (8, 20)}


@family("search_dead_end", looping=True, **{**REAL, "personas": ("paraphraser", "stubborn")})
def search_dead_end(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Reworded look-ups of one subject, each failing with the suggestions already seen."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        for _ in range(200):
            entity = render(rng.sample(CONCEPT_NAMES, rng.choice((2, 2, 3))), rng)
            first = ToolCall("wiki_search", {"entity": entity})
            if b.world.title_match(entity) is None and b.gains(first):
                break
        else:
            raise ScriptError("no failing look-up with fresh suggestions")
        b.add(first, thought=f"Looking up {entity!r}.")
        seen = [entity]
        for _ in range(loop_length(rng, p)):
            if rng.random() < 0.25:  # quoted, as agents often retry a title
                nxt = f'"{paraphrase(entity, rng, avoid=seen[-3:])}"'
            else:
                nxt = paraphrase(entity, rng, avoid=seen[-3:])
            seen.append(nxt)
        calls = [ToolCall("wiki_search", {"entity": e}) for e in seen[1:] if b.world.title_match(e) is None]
        if len(calls) < 2:
            raise ScriptError("every rewording is a title")
        return Stuck(calls)

    return build_looping(rng, p, "search_dead_end", setup)


@family("rerun_code", looping=True, **REAL)
def rerun_code(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The same code run again (at most cosmetically edited) for the same output."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        a, c, d = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 9)
        code = rng.choice((f"x = {a} * {c}\nprint(x)", f"total = {a} + {c}\nprint(total / {d})",
                           f"rate = {a} / {c}\nprint(rate * 100)", f"print({a} ** 2 - {c})"))
        b.add(ToolCall("run_code", {"code": code}), thought="Running the computation.")
        variant = rng.choice(("exact", "cosmetic"))
        stuck = []
        for i in range(loop_length(rng, p)):
            if variant == "exact" or i % 3 == 0:
                stuck.append(code)
            else:  # a comment, blank lines or spacing changed: the same computation
                stuck.append(rng.choice((f"# check again\n{code}", f"{code}\n", code.replace(" = ", "="),
                                         "\n".join(line + "  # verify" for line in code.split("\n")), f"\n{code}\n\n")))
        return Stuck([ToolCall("run_code", {"code": s}) for s in stuck], meta={"variant": variant})

    return build_looping(rng, p, "rerun_code", setup)


@family("scroll_stall", looping=True, **REAL)
def scroll_stall(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Scrolling on at the end of a page: the same last screen again and again."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        url = f"https://www.example.org/{rng.choice(CONCEPT_NAMES)}/{rng.randint(1, 999)}"
        b.add(ToolCall("open_url", {"url": url}), thought=f"Opening {url}.")
        args = rng.choice(({}, {"direction": "down"}))
        for _ in range(viewports(b.world.seed, url) - 1):
            b.add(ToolCall("scroll", dict(args)), thought="Scrolling down.")
        return Stuck([ToolCall("scroll", dict(args))] * loop_length(rng, p), meta={"screens": viewports(b.world.seed, url)})

    return build_looping(rng, p, "scroll_stall", setup)


_ASKS = ("Please find {q} and report back.", "Search for {q}.", "Look up {q} and tell me what you see.",
         "Go to the page about {q} and summarise it.", "Find information on {q}.", "Can you check {q}?",
         "I need {q}; please search for it again.", "Try once more to find {q}.")


@family("redelegate", looping=True, **{**REAL, "personas": ("paraphraser", "stubborn")})
def redelegate(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """A fulfilled request re-delegated in new words; the sub-agent gives no reply."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        agent = rng.choice(("WebSurfer", "FileSurfer", "Coder"))
        for _ in range(200):
            q = render(rng.sample(CONCEPT_NAMES, rng.choice((2, 3))), rng, filler=False)
            first = ToolCall("delegate", {"agent": agent, "instruction": rng.choice(_ASKS).format(q=q)})
            if request_key(q) and b.gains(first):
                break
        else:
            raise ScriptError("no fresh request to delegate")
        b.add(first, thought=f"Asking {agent} for {q!r}.")
        seen = [first.args["instruction"]]
        for _ in range(loop_length(rng, p)):
            for _ in range(20):
                text = rng.choice(_ASKS).format(q=paraphrase(q, rng))
                if text not in seen[-3:] and request_key(text) == request_key(q):
                    break
            seen.append(text)
        return Stuck([ToolCall("delegate", {"agent": agent, "instruction": s}) for s in seen[1:]], meta={"agent": agent})

    return build_looping(rng, p, "redelegate", setup)

