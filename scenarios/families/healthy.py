"""Healthy families (negatives), including the hard ones that look like loops."""
from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from detectors.protocol import ToolCall

from ..agents import Intent, Script
from ..base import Scenario, family
from ..lexicon import concepts_of
from ..text import refine, render
from ..world import World
from .builder import CONCEPT_NAMES, PathBuilder, ScriptError, fixed_loop, span


def _start(rng: random.Random) -> tuple[World, PathBuilder]:
    world = World.build(rng.randrange(1 << 30))
    return world, PathBuilder(world, random.Random(rng.random()))


def _scenario(world: World, script: Script, persona: str = "diligent", **meta: Any) -> Scenario:
    return Scenario("", "", 0, world, script, persona, meta=meta)


@family("healthy", looping=False, length=(4, 24), tree_share=0.2, branching=2, depth=1)
def healthy(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Diverse, productive calls (sometimes exploring branches in parallel)."""
    world, b = _start(rng)
    n = rng.randint(*span(p["length"]))
    if rng.random() < p["tree_share"]:
        b.add_productive(max(1, n // 2))
        return _scenario(world, branch_out(b, rng, p["branching"], p["depth"], (1, max(1, n - n // 2))), tree=True)
    b.add_productive(n)
    return _scenario(world, b.script(), tree=False)


@family("same_tool", looping=False, length=(6, 12))
def same_tool(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """One tool, different arguments: many files, distinct topics, or two passes over a list."""
    world, b = _start(rng)
    variant = rng.choice(("files", "topics", "two_pass"))
    n = rng.randint(*span(p["length"]))
    if variant == "files":
        d = rng.choice(world.dirs())
        b.add(ToolCall("list_dir", {"path": d}))
        for path in sorted(f for f in world.files if f.startswith(d + "/"))[:n]:
            b.add(ToolCall("read_file", {"path": path}))
    elif variant == "topics":
        b.add_productive(n, per_turn=(1,), tools=("search",))
    else:
        d = rng.choice(world.dirs())
        files = sorted(f for f in world.files if f.startswith(d + "/"))[: max(3, n // 2)]
        for path in files:
            b.add(ToolCall("read_file", {"path": path}))
        for path in files:  # the second pass reads what the first pass changed
            b.add(ToolCall("write_file", {"path": path, "content": world.files[path] + "\n# reviewed"}))
        for path in files:
            b.add(ToolCall("read_file", {"path": path}))
    return _scenario(world, b.script(), variant=variant)


@family("polling", looping=False, polls=(3, 7))
def polling(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The same check_status call whose answer changes each time, until the job is done."""
    world, b = _start(rng)
    b.add_productive(rng.randint(1, 4))
    job = f"job-{rng.randint(100, 999)}"
    polls = rng.randint(*span(p["polls"]))
    world.jobs[job] = polls
    for _ in range(polls + 1):  # the last poll sees "succeeded"
        b.add(ToolCall("check_status", {"job_id": job}), thought=f"Waiting for {job}; checking its status.")
    b.add_productive(rng.randint(1, 4))
    return _scenario(world, b.script(), polls=polls)


@family("transient_retry", looping=False, failures=(1, 2))
def transient_retry(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The same http_get after a transient error, within the tool's retry allowance."""
    world, b = _start(rng)
    b.add_productive(rng.randint(1, 5))
    fails = rng.randint(*span(p["failures"]))
    for _ in range(rng.choice((1, 1, 2))):
        url = f"https://status.example.com/{rng.choice(CONCEPT_NAMES)}/{rng.randint(1, 99)}"
        world.flaky[url] = fails
        for _ in range(fails + 1):
            b.add(ToolCall("http_get", {"url": url}), thought=f"Fetching {url}; retrying if it fails.")
        b.add_productive(rng.randint(1, 3))
    return _scenario(world, b.script(), failures=fails)


@family("refinement", looping=False, refinements=(2, 4))
def refinement(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Reworded queries that do return new documents (the hard negative for similarity)."""
    world, b = _start(rng)
    b.add_productive(rng.randint(0, 3))
    for _ in range(50):
        q = render(rng.sample(CONCEPT_NAMES, 2), rng)
        if b.gains(ToolCall("search", {"query": q})):
            break
    b.add(ToolCall("search", {"query": q}), thought="Searching for the figures.")
    want = rng.randint(*span(p["refinements"]))
    made = 0
    while made < want:
        options = [r for r in refine(q, rng, CONCEPT_NAMES) if b.gains(ToolCall("search", {"query": r}))]
        if not options:
            raise ScriptError("no refinement retrieves anything new")
        q = options[0]
        b.add(ToolCall("search", {"query": q}), thought="Not quite; narrowing the search.")
        made += 1
    b.add_productive(rng.randint(1, 3))
    return _scenario(world, b.script())


@family("edit_test", looping=False, rounds=(2, 4))
def edit_test(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Edit a file, re-run the same tests, repeat while the results change."""
    world, b = _start(rng)
    target = rng.choice(("tests", "tests/", "./tests"))
    b.add(ToolCall("run_tests", {"target": target}))
    src = sorted(f for f in world.files if f.startswith("src/"))
    for r in range(rng.randint(*span(p["rounds"]))):
        path = src[r % len(src)]
        b.add(ToolCall("read_file", {"path": path}))
        b.add(ToolCall("write_file", {"path": path, "content": world.files[path] + f"\n# fix {r}"}))
        b.add(ToolCall("run_tests", {"target": target}), thought="Re-running the tests after the edit.")
    return _scenario(world, b.script())


@family("long_horizon", looping=False, length=(35, 50))
def long_horizon(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """A long, productive episode (longer than common step budgets)."""
    world, b = _start(rng)
    b.add_productive(rng.randint(*span(p["length"])))
    return _scenario(world, b.script())


@family("branch_siblings", looping=False, branching=3, depth=1, after=(2, 4))
def branch_siblings(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The same calls on sibling branches: a loop on neither."""
    world, b = _start(rng)
    b.add_productive(rng.randint(1, 3))
    return _scenario(world, branch_out(b, rng, p["branching"], p["depth"], span(p["after"])), branching=p["branching"], depth=p["depth"])


def branch_out(b: PathBuilder, rng: random.Random, k: int, depth: int, after: tuple[int, int],
               tools: tuple[str, ...] | None = None) -> Script:
    """A branching turn of ``k`` different calls; every branch then does the same work
    (drawn from ``tools`` when given)."""
    only = {"tools": tools} if tools else {}
    first = []
    probe = b.fork()
    for _ in range(k):
        c = probe.productive(**only)
        first.append(c)
    shared: list[ToolCall] = []
    # Work every branch does: fresh on each path (its parent never did it).
    probe = b.fork()
    for c in first:
        probe.run(c)
    for _ in range(rng.randint(*after)):
        c = probe.productive(**only)
        probe.run(c)
        shared.append(c)
    branches = []
    for c in first:
        child = b.fork()
        child.run(c)
        for s in shared:
            child.add(s)
        branches.append(branch_out(child, rng, k, depth - 1, after, tools) if depth > 1 else child.script())
    b.turns.append(Intent(tuple(first), "Let me explore these options in parallel.", "branch", (False,) * k))
    return b.script(branches=tuple(branches))


@family("compliant", looping=False, prefix=(0, 12), nudge_at=(1, 3), after=(3, 8), tree_share=0.2, branching=2,
        loop_length=(30, 50))
def compliant(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """The agent loops, is nudged, then genuinely changes course; what follows is healthy."""
    world, b = _start(rng)
    b.add_productive(rng.randint(*span(p["prefix"])))
    nudge_at = rng.randint(*span(p["nudge_at"]))
    variant = rng.choice(("file", "search"))
    if variant == "file":
        a = b.productive(tools=("read_file",))
    else:
        for _ in range(200):
            a = ToolCall("search", {"query": render(rng.sample(CONCEPT_NAMES, 2), rng)})
            if b.gains(a) and len(world._rank(concepts_of(a.args["query"]))) > 3:
                break
        else:
            raise ScriptError("no search with more than one page of results")
    b.add(a)
    stuck = [a] * rng.randint(*span(p["loop_length"]))
    b.check_loop(stuck)
    for _ in range(nudge_at - 1):  # the repeats that ran before the guard's nudge
        b.run(a)
    at = len(b.turns)
    # Everything up to the nudged call is history the agent brings along.
    scored_from = sum(len(t.calls) for t in b.turns) + nudge_at
    # After the nudge: fresh work, including calls that look like the loop on stale
    # evidence but gain something now.
    b.add_productive(rng.randint(0, 2))
    if variant == "file":
        path = a.args["path"]
        b.add(ToolCall("write_file", {"path": path, "content": world.files[path] + "\n# fixed after review"}),
              thought="Reading it again will not help; let me fix the file instead.")
        b.add(ToolCall("read_file", {"path": path}), thought="Checking the file after my edit.")
    else:
        q = a.args["query"]
        b.add(ToolCall("search", {"query": q, "limit": 3, "offset": 3}),
              thought="Same results again; let me look at the next page instead.")
        options = [r for r in refine(q, rng, CONCEPT_NAMES) if b.gains(ToolCall("search", {"query": r}))]
        if options:
            b.add(ToolCall("search", {"query": options[0]}), thought="Narrowing to a related question.")
    tree = rng.random() < p["tree_share"]
    b.add_productive(max(0, rng.randint(*span(p["after"])) - (3 if tree else 0)))
    b.turns[at] = replace(b.turns[at], thought="Understood, repeating that will not help. " + b.turns[at].thought)
    loop = fixed_loop(at, "stale", stuck)
    script = branch_out(b, rng, p["branching"], 1, (1, 3)) if tree else b.script()
    sc = _scenario(world, replace(script, loop=loop), variant=variant, nudge_at=nudge_at, tree=tree)
    sc.scored_from = scored_from
    sc.recording_guard = ("normalized", {"threshold": nudge_at + 1})
    return sc
