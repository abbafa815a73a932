"""Looping families (positives): every way SPEC §3 says agents get stuck.

Each family writes a productive prefix, sets up what the agent will get stuck on, and
hands a list of stuck calls to the agent. With probability ``tree_share`` the episode
is a tree: the loop happens on one branch while its siblings work normally.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

from detectors.protocol import ToolCall

from ..agents import Intent, Script
from ..base import Scenario, family
from ..lexicon import concepts_of
from ..text import cosmetic_variants, paraphrase, render
from ..world import World
from .builder import CONCEPT_NAMES, PathBuilder, ScriptError, fixed_loop

COMMON = dict(prefix=(0, 20), loop_length=(30, 50), tree_share=0.3, branching=2)


@dataclass
class Stuck:
    """What a family's setup returns: the stuck calls and how they are proposed."""

    calls: list[ToolCall]
    productive: frozenset[int] = frozenset()
    per_turn: int = 1
    on_nudge: list[ToolCall] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _searchable(b: PathBuilder, rng: random.Random, k: int = 2, limit: int | None = None) -> ToolCall:
    for _ in range(200):
        args: dict[str, Any] = {"query": render(rng.sample(CONCEPT_NAMES, k), rng)}
        if limit is not None:
            args["limit"] = limit
        call = ToolCall("search", args)
        if b.gains(call):
            return call
    raise ScriptError("no fresh search found")


def build_looping(rng: random.Random, p: dict[str, Any], kind: str,
                  setup: Callable[[PathBuilder, random.Random, dict[str, Any]], Stuck],
                  persona: str = "stubborn") -> Scenario:
    world = World.build(rng.randrange(1 << 30))
    b = PathBuilder(world, random.Random(rng.random()))
    b.add_productive(rng.randint(*p["prefix"]))
    tree = rng.random() < p["tree_share"]
    meta: dict[str, Any] = {"tree": tree}
    if not tree:
        stuck = setup(b, rng, p)
        b.check_loop(stuck.calls, stuck.productive)
        script = b.script(loop=fixed_loop(len(b.turns), kind, stuck.calls, productive=stuck.productive,
                                          per_turn=stuck.per_turn, on_nudge=stuck.on_nudge))
    else:
        k = p["branching"]
        firsts = []
        probe = b.fork()
        for _ in range(k):
            c = probe.productive()
            probe.run(c)
            firsts.append(c)
        looping_branch = rng.randrange(k)
        branches = []
        for i, c in enumerate(firsts):
            child = b.fork()
            child.run(c)
            if i == looping_branch:
                stuck = setup(child, rng, p)
                child.check_loop(stuck.calls, stuck.productive)
                branches.append(child.script(loop=fixed_loop(len(child.turns), kind, stuck.calls, productive=stuck.productive,
                                                             per_turn=stuck.per_turn, on_nudge=stuck.on_nudge)))
            else:
                child.add_productive(rng.randint(2, 5))
                branches.append(child.script())
        b.turns.append(Intent(tuple(firsts), "Let me try these in parallel.", "branch", (False,) * k))
        script = b.script(branches=tuple(branches))
        meta["looping_branch"] = looping_branch
    meta.update(stuck.meta)
    return Scenario("", "", 0, world, script, persona, meta=meta)


def _length(rng: random.Random, p: dict[str, Any]) -> int:
    return rng.randint(*p["loop_length"])


@family("stale", looping=True, **COMMON)
def stale(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The identical call again, unchanged result: consecutive, interleaved, key-reordered."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        variant = rng.choice(("consecutive", "interleaved", "reordered"))
        n = _length(rng, p)
        a = b.productive(tools=("search", "read_file", "http_get", "list_dir"))
        if variant == "reordered" or a.tool == "search":
            a = ToolCall(a.tool, {**a.args, "limit": 3}) if a.tool == "search" else a
        b.add(a)
        if variant == "consecutive":
            return Stuck([a] * n, meta={"variant": variant})
        if variant == "reordered":
            rev = ToolCall(a.tool, dict(reversed(list(a.args.items()))))
            return Stuck([rev if i % 2 == 0 else a for i in range(n)], meta={"variant": variant})
        # A X A Y A: the stuck call comes back between other calls the agent already made.
        others = [b.productive(tools=("read_file", "list_dir", "calc"))]
        b.add(others[0])
        others.append(b.productive(tools=("read_file", "list_dir", "calc")))
        b.add(others[1])
        seq = []
        for i in range(n):
            seq.append(a if i % 2 == 0 else others[(i // 2) % 2])
        return Stuck(seq, meta={"variant": variant})

    return build_looping(rng, p, "stale", setup)


@family("cosmetic", looping=True, **COMMON)
def cosmetic_family(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The same call with case / whitespace / formatting differences."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        if rng.random() < 0.6:
            a = _searchable(b, rng)
            b.add(a)
            text = a.args["query"]
            return Stuck([ToolCall("search", {"query": q}) for q in cosmetic_variants(text, rng, _length(rng, p))])
        path = rng.choice(sorted(f for f in b.world.files))
        a = ToolCall("read_file", {"path": path})
        if not b.gains(a):
            a = b.productive(tools=("read_file",))
            path = a.args["path"]
        b.add(a)
        forms = [f"./{path}", f"{path} ", f" {path}", path.replace("/", "//"), f"./{path} "]
        return Stuck([ToolCall("read_file", {"path": forms[i % len(forms)]}) for i in range(_length(rng, p))])

    return build_looping(rng, p, "cosmetic", setup)


@family("paraphrased", looping=True, **COMMON)
def paraphrased(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The same intent reworded: synonyms, reordered words, filler, casing."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        a = _searchable(b, rng, k=rng.choice((2, 2, 3)))
        b.add(a)
        seen = [a.args["query"]]
        for _ in range(_length(rng, p)):
            seen.append(paraphrase(a.args["query"], rng, avoid=seen[-3:]))
        return Stuck([ToolCall("search", {"query": q}) for q in seen[1:]])

    return build_looping(rng, p, "paraphrased", setup, persona="paraphraser")


@family("drift", looping=True, **COMMON)
def drift(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Parameter nudging that returns nothing new: limit 9 -> 10 -> 11, offsets past the end."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        for _ in range(200):
            q = render(rng.sample(CONCEPT_NAMES, 2), rng)
            ranked = b.world._rank(concepts_of(q))
            if 1 <= len(ranked) <= 8 and not any(f"doc:{d.id}" in b.known for d in ranked):
                total = len(ranked)
                break
        else:
            raise ScriptError("no short result list to drift over")
        n = _length(rng, p)
        if rng.random() < 0.5:
            b.add(ToolCall("search", {"query": q, "limit": total}))
            return Stuck([ToolCall("search", {"query": q, "limit": total + 1 + i}) for i in range(n)], meta={"variant": "limit"})
        page = 2
        b.add(ToolCall("search", {"query": q, "limit": page, "offset": 0}))
        off = page
        while off < total:
            b.add(ToolCall("search", {"query": q, "limit": page, "offset": off}))
            off += page
        b.add(ToolCall("search", {"query": q, "limit": page, "offset": off}))  # the first empty page is news
        return Stuck([ToolCall("search", {"query": q, "limit": page, "offset": off + page * (i + 1)}) for i in range(n)],
                     meta={"variant": "offset"})

    return build_looping(rng, p, "drift", setup)


@family("cycle", looping=True, **COMMON, cycle=(2, 5))
def cycle(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Ping-pong and longer cycles: A B A B ..., A B C A B C ..."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        k = rng.randint(*p["cycle"])
        members = []
        for _ in range(k):
            c = b.productive(tools=("read_file", "search", "list_dir", "http_get", "calc"))
            b.add(c)
            members.append(c)
        n = max(_length(rng, p), 2 * k)
        return Stuck([members[i % k] for i in range(n)], meta={"cycle": k})

    return build_looping(rng, p, "cycle", setup)


@family("parallel_burst", looping=True, **{**COMMON, "loop_length": (4, 10)})
def parallel_burst(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Many identical calls proposed in one turn."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        a = b.productive(tools=("http_get", "read_file", "search"))
        n = _length(rng, p)
        return Stuck([a] * n, productive=frozenset({0}), per_turn=n)

    return build_looping(rng, p, "parallel_burst", setup)


@family("no_progress", looping=True, **COMMON)
def no_progress(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Every call is new, none yields new information."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        # Learn a few things first, so that there is something to re-find in new words.
        concepts = rng.sample(CONCEPT_NAMES, 3)
        for c in concepts:
            call = ToolCall("search", {"query": render([c], rng), "limit": 5})
            if b.gains(call):
                b.add(call)
        d = rng.choice(b.world.dirs())
        if b.gains(ToolCall("list_dir", {"path": d})):
            b.add(ToolCall("list_dir", {"path": d}))
        value = rng.randint(50, 400)
        b.add(ToolCall("calc", {"expression": f"{value} * 1"}))
        n = _length(rng, p)
        stuck: list[ToolCall] = []
        seen: set[str] = set()
        for _ in range(5000):
            if len(stuck) >= n:
                break
            r = rng.random()
            if r < 0.55:
                call = ToolCall("search", {"query": render(rng.sample(concepts, rng.choice((1, 2))), rng),
                                           "limit": rng.choice((1, 2))})
            elif r < 0.7:
                call = ToolCall("list_dir", {"path": rng.choice((f"./{d}", f"{d}/", f"./{d}/", d))})
            else:
                a = rng.randint(1, value - 1)
                call = ToolCall("calc", {"expression": f"{a} + {value - a}"})
            key = call.tool + repr(sorted(call.args.items()))
            if key in seen or b.gains(call):
                continue
            seen.add(key)
            stuck.append(call)
        if len(stuck) < n:
            raise ScriptError("could not find enough new-but-uninformative calls")
        return Stuck(stuck)

    return build_looping(rng, p, "no_progress", setup)


@family("same_error", looping=True, **COMMON)
def same_error(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Different arguments, the same error every time."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        ids = rng.sample(range(1000, 9999), _length(rng, p) + 1)
        resource = rng.choice(("orders", "users", "invoices", "tickets"))
        calls = [ToolCall("http_get", {"url": f"https://api.internal/{resource}/{i}"}) for i in ids]
        b.add(calls[0])  # the first 401 is news
        return Stuck(calls[1:])

    return build_looping(rng, p, "same_error", setup)
