"""Looping families (positives): every way SPEC §3 says agents get stuck.

Each family writes a productive prefix, sets up what the agent will get stuck on, and
hands a list of stuck calls to the agent: a runaway loop (the agent gives up after
``loop_length``) or, with probability ``blip_share``, a blip (SPEC §11: a redundant call or
two, then the agent moves on by itself, as half the real loops do). With probability
``tree_share`` the episode is a tree: the loop happens on one branch of each of ``depth``
nested branching turns while the siblings work normally. ``evasion`` is recorded under a
one-shot guard so its trace shows the nudge; ``replan`` is played by a planner that
declares its plan.
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
from .builder import CONCEPT_NAMES, PathBuilder, ScriptError, fixed_loop, loop_length, span

#: Parameters every looping family takes (see ``loopbench list --family NAME``):
#: ``prefix`` productive calls before the loop (where it starts), ``loop_length`` stuck
#: calls before the agent gives up, ``tree_share`` the chance that the episode is a tree,
#: ``branching`` calls per branching turn, ``depth`` branching turns on the looping path,
#: ``personas`` the persona mix drawn from (it only matters in closed loop, where a nudge
#: can make an obedient agent recover with probability ``recover_p``).
#: ``blip_share`` of the loops are blips: ``blip_length`` stuck calls, then the agent goes back
#: to work on its own (``blip_after`` productive calls). Half, because half the loops of the
#: labelled real traces are blips (33 of 64; per corpus 2/3, 10/17, 15/36, 6/8; left one
#: corpus out the other three give 0.48-0.64), and each blip is 1 or 2 redundant calls.
COMMON = dict(prefix=(0, 20), loop_length=(30, 50), tree_share=0.3, branching=2, depth=(1, 2),
              personas=("stubborn", "obedient"), recover_p=0.7, blip_share=0.5, blip_length=(1, 2),
              blip_after=(2, 5))

@dataclass
class Stuck:
    """What a family's setup returns: the stuck calls and how they are proposed."""

    calls: list[ToolCall]
    productive: frozenset[int] = frozenset()
    per_turn: int = 1
    on_nudge: list[ToolCall] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: Turns after the loop: what the agent does if a nudge makes it change course.
    then: Callable[[PathBuilder], None] | None = None


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
                  persona: str | None = None,
                  prefix: Callable[[PathBuilder, random.Random, dict[str, Any]], None] | None = None,
                  tools: tuple[str, ...] | None = None) -> Scenario:
    """A looping scenario: a productive prefix, then (in a tree, on one branch of each of
    ``depth`` branching turns) the stuck calls ``setup`` returns; siblings work normally.
    ``tools`` restricts the productive calls (prefix and siblings) to those tools."""
    only = {"tools": tools} if tools else {}
    world = World.build(rng.randrange(1 << 30))
    b = PathBuilder(world, random.Random(rng.random()))
    if prefix is not None:
        prefix(b, rng, p)
    else:
        b.add_productive(rng.randint(*span(p["prefix"])), **only)
    tree = rng.random() < p["tree_share"]
    meta: dict[str, Any] = {"tree": tree}
    info: dict[str, Any] = {}

    drawn = _draw_blip(rng, p)
    blip = bool(drawn)
    if drawn is not None:
        meta["blip"] = drawn

    def stuck_script(sb: PathBuilder) -> Script:
        stuck = setup(sb, rng, p)
        if blip:  # the first call or two of the loop a runaway would make
            stuck.calls = stuck.calls[:_blip_end(stuck, rng.randint(*span(p["blip_length"])))]
        sb.check_loop(stuck.calls, stuck.productive)
        info.update(stuck.meta)
        at = len(sb.turns)
        if blip:  # the turns after the stuck stretch are played from the state it leaves
            for c in stuck.calls:
                sb.run(c)
        if stuck.then is not None:
            stuck.then(sb)
        if blip:
            sb.add_productive(rng.randint(*span(p["blip_after"])), **only)
        return sb.script(loop=fixed_loop(at, kind, stuck.calls, productive=stuck.productive,
                                         per_turn=stuck.per_turn, on_nudge=stuck.on_nudge, resume=blip))

    if not tree:
        script = stuck_script(b)
    else:
        depth = rng.randint(*span(p["depth"]))
        meta["depth"] = depth
        meta["looping_branch"] = []
        script = _grow(b, rng, p["branching"], depth, stuck_script, meta["looping_branch"], only)
    meta.update(info)
    chosen = persona or rng.choice(tuple(p.get("personas") or ("stubborn",)))
    meta["persona"] = chosen
    return Scenario("", "", 0, world, script, chosen, meta=meta, recover_p=float(p.get("recover_p", 0.7)))


def _draw_blip(rng: random.Random, p: dict[str, Any]) -> bool | None:
    """Whether this episode's loop is a blip; None without a draw (``blip_share`` 0), so that
    a suite without blips keeps the episodes it had."""
    share = p.get("blip_share", 0.0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
        raise ValueError(f"blip_share must be a number in [0, 1], not {share!r}")
    if share == 0:
        return None
    if span(p["blip_length"])[0] < 1 or span(p["blip_after"])[0] < 0:
        raise ValueError(f"blip_length must be at least 1 and blip_after at least 0, not {p['blip_length']!r} and "
                         f"{p['blip_after']!r}")
    return rng.random() < share


def _blip_end(stuck: Stuck, redundant: int) -> int:
    """How many of ``stuck.calls`` make ``redundant`` redundant ones (its productive calls
    do not count)."""
    seen = 0
    for i in range(len(stuck.calls)):
        seen += i not in stuck.productive
        if seen >= redundant:
            return i + 1
    return len(stuck.calls)


def _grow(b: PathBuilder, rng: random.Random, k: int, depth: int, leaf: Callable[[PathBuilder], Script],
          chosen: list[int], only: dict[str, Any] | None = None) -> Script:
    """A branching turn of ``k`` fresh calls; one branch goes ``depth - 1`` levels deeper
    (and finally loops), the others do a little productive work and finish."""
    only = only or {}
    firsts = []
    probe = b.fork()
    for _ in range(k):
        c = probe.productive(**only)
        probe.run(c)
        firsts.append(c)
    looping_branch = rng.randrange(k)
    chosen.append(looping_branch)
    branches = []
    for i, c in enumerate(firsts):
        child = b.fork()
        child.run(c)
        if i == looping_branch:
            if depth > 1:
                child.add_productive(rng.randint(1, 3), **only)
                branches.append(_grow(child, rng, k, depth - 1, leaf, chosen, only))
            else:
                branches.append(leaf(child))
        else:
            child.add_productive(rng.randint(2, 5), **only)
            branches.append(child.script())
    b.turns.append(Intent(tuple(firsts), "Let me try these in parallel.", "branch", (False,) * k))
    return b.script(branches=tuple(branches))


@family("stale", looping=True, **COMMON)
def stale(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The identical call again, unchanged result: consecutive, interleaved, key-reordered."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        variant = rng.choice(("consecutive", "interleaved", "reordered"))
        n = loop_length(rng, p)
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
            return Stuck([ToolCall("search", {"query": q}) for q in cosmetic_variants(text, rng, loop_length(rng, p))])
        path = rng.choice(sorted(f for f in b.world.files))
        a = ToolCall("read_file", {"path": path})
        if not b.gains(a):
            a = b.productive(tools=("read_file",))
            path = a.args["path"]
        b.add(a)
        forms = [f"./{path}", f"{path} ", f" {path}", path.replace("/", "//"), f"./{path} "]
        return Stuck([ToolCall("read_file", {"path": forms[i % len(forms)]}) for i in range(loop_length(rng, p))])

    return build_looping(rng, p, "cosmetic", setup)


@family("paraphrased", looping=True, **{**COMMON, "personas": ("paraphraser",)})
def paraphrased(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The same intent reworded: synonyms, reordered words, filler, casing."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        a = _searchable(b, rng, k=rng.choice((2, 2, 3)))
        b.add(a)
        seen = [a.args["query"]]
        for _ in range(loop_length(rng, p)):
            seen.append(paraphrase(a.args["query"], rng, avoid=seen[-3:]))
        return Stuck([ToolCall("search", {"query": q}) for q in seen[1:]])

    return build_looping(rng, p, "paraphrased", setup)


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
        n = loop_length(rng, p)
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


@family("cycle", looping=True, **COMMON, cycle=(2, 8))
def cycle(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Ping-pong and longer cycles: A B A B ..., A B C A B C ..."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        k = rng.randint(*span(p["cycle"]))
        members = []
        for _ in range(k):
            c = b.productive(tools=("read_file", "search", "list_dir", "http_get", "calc"))
            b.add(c)
            members.append(c)
        n = max(loop_length(rng, p), 2 * k)
        return Stuck([members[i % k] for i in range(n)], meta={"cycle": k})

    return build_looping(rng, p, "cycle", setup)


@family("parallel_burst", looping=True, **{**COMMON, "loop_length": (4, 10), "personas": ("stubborn",), "blip_share": 0.0})
def parallel_burst(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Many identical calls proposed in one turn."""

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        a = b.productive(tools=("http_get", "read_file", "search"))
        n = loop_length(rng, p)
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
        n = loop_length(rng, p)
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
        ids = rng.sample(range(1000, 9999), loop_length(rng, p) + 1)
        resource = rng.choice(("orders", "users", "invoices", "tickets"))
        calls = [ToolCall("http_get", {"url": f"https://api.internal/{resource}/{i}"}) for i in ids]
        b.add(calls[0])  # the first 401 is news
        return Stuck(calls[1:])

    return build_looping(rng, p, "same_error", setup)


@family("evasion", looping=True, **{**COMMON, "personas": ("evasive",), "nudge_at": (1, 2), "blip_share": 0.0})
def evasion(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """After a nudge the agent rewords the call instead of changing course."""
    nudge_at = rng.randint(*span(p["nudge_at"]))

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        a = _searchable(b, rng, k=rng.choice((2, 2, 3)))
        b.add(a)
        n = max(loop_length(rng, p), nudge_at + 2)
        # Every rewording differs from all the others after normalisation, so the guard
        # that nudged the repeat does not fire again: the agent has evaded it.
        seen = [a.args["query"]]
        for _ in range(n):
            seen.append(paraphrase(a.args["query"], rng, avoid=seen))
        reworded = [ToolCall("search", {"query": q, **({"limit": 3} if rng.random() < 0.3 else {})}) for q in seen[1:]]
        b.check_loop(reworded)
        return Stuck([a] * n, on_nudge=reworded, meta={"nudge_at": nudge_at})

    sc = build_looping(rng, p, "evasion", setup)
    # The open-loop episode is recorded under a guard that nudges the nudge_at-th repeat,
    # so the trace shows the nudge and the rewording after it.
    sc.recording_guard = ("normalized", {"threshold": nudge_at + 1})
    return sc


def _step_name(i: int, call: ToolCall) -> str:
    arg = str(next(iter(call.args.values()), "")) if call.args else ""
    verb = {"search": "search", "read_file": "read", "list_dir": "list", "calc": "compute", "http_get": "fetch"}.get(call.tool, call.tool)
    return f"{i + 1}. {verb} {arg[:40]}".strip()


def _reword(call: ToolCall, rng: random.Random) -> ToolCall:
    """The same call lightly reworded: what a sloppy planner sends when it redoes a step."""
    args = dict(call.args)
    if call.tool == "search":
        args["query"] = paraphrase(args["query"], rng)
    elif call.tool in ("read_file", "list_dir"):
        args["path"] = rng.choice((f"./{args['path']}", f"{args['path']}/", args["path"].replace("/", "//")))
    elif call.tool == "calc":
        args["expression"] = args["expression"].replace(" ", "")
    return ToolCall(call.tool, args, step=call.step)


@family("replan", looping=True, **{**COMMON, "loop_length": (3, 12), "personas": ("planner",),
                                   "plan_length": (4, 8), "prefix": (2, 5), "sloppy_steps": (1, 2)})
def replan(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """A stale plan is re-planned sloppily and a finished step comes back."""
    plan: dict[str, Any] = {}

    def prefix(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> None:
        n = rng.randint(*span(p["plan_length"]))
        probe = b.fork()
        calls = []
        for i in range(n):
            c = probe.productive()
            probe.run(c)
            calls.append(c)
        names = tuple(_step_name(i, c) for i, c in enumerate(calls))
        calls = [ToolCall(c.tool, c.args, step=names[i]) for i, c in enumerate(calls)]
        done = max(1, min(rng.randint(*span(p["prefix"])), n - 1))
        for i in range(done):
            b.add(calls[i], plan=names if i == 0 else None,
                  thought=("My plan: " + "; ".join(names) + ".") if i == 0 else f"Now step {names[i]!r}.")
        plan.update(names=names, calls=calls, done=done)

    def setup(b: PathBuilder, rng: random.Random, p: dict[str, Any]) -> Stuck:
        names, calls, done = plan["names"], plan["calls"], plan["done"]
        k = min(rng.randint(*span(p["sloppy_steps"])), done)
        again = sorted(rng.sample(range(done), k))
        new_plan = tuple(names[i] for i in again) + names[done:]
        b.turns.append(Intent((), "These results change things; the plan is stale. Re-planning: " + "; ".join(new_plan) + ".",
                              plan=new_plan))
        stuck = []
        for j in range(loop_length(rng, p)):
            c = calls[again[j % k]]
            stuck.append(_reword(c, rng) if rng.random() < 0.5 else c)

        def then(sb: PathBuilder) -> None:  # the open steps, for an agent that follows a redirect
            for c in calls[done:]:
                if sb.gains(c):
                    sb.add(c, thought=f"Now step {c.step!r}.")

        return Stuck(stuck, then=then, meta={"plan_length": len(names), "done_before_replan": done, "sloppy": k})

    return build_looping(rng, p, "replan", setup, prefix=prefix)
