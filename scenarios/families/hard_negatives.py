"""Healthy families modelled on what real clean runs do that looks like looping.

Each is a kind of situation seen in published traces (SPEC §10): a write whose answer
repeats a record read before (booking agents), failing look-ups that each suggest
something new (ReAct), new code printing an old output (code-running agents), scrolling
a long page (web agents), a retry with a corrected id. Every call gains something in
the world; the families exist to see which guards mistake them for loops.
"""
from __future__ import annotations

import random
from typing import Any

from detectors.protocol import ToolCall

from ..base import Scenario, family
from ..text import render
from ..world import World
from .builder import CONCEPT_NAMES, PathBuilder, ScriptError, span
from .healthy import branch_out

#: Parameters these families share: ``tree_share`` the chance that the episode ends in a
#: branching turn whose branches each do a little more work.
TREE = dict(tree_share=0.2, branching=2)


def start_world(rng: random.Random) -> tuple[World, PathBuilder]:
    world = World.build(rng.randrange(1 << 30))
    return world, PathBuilder(world, random.Random(rng.random()))


def finish(world: World, b: PathBuilder, rng: random.Random, p: dict[str, Any], tools: tuple[str, ...] | None = None,
           **meta: Any) -> Scenario:
    """The scenario, ending in a branching turn with probability ``tree_share``."""
    tree = rng.random() < p["tree_share"]
    script = branch_out(b, rng, p["branching"], 1, (1, 3), tools) if tree else b.script()
    return Scenario("", "", 0, world, script, "diligent", meta={**meta, "tree": tree})


@family("write_echo", looping=False, rounds=(2, 4), **TREE)
def write_echo(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Writes (update, cancel) whose answer repeats a record read before: the write changed the world."""
    world, b = start_world(rng)
    ids = list(world.record_ids())
    rng.shuffle(ids)
    mine = ids[:rng.randint(2, 4)]
    for rid in mine:  # fan-out: the same tool over the user's records
        b.add(ToolCall("get_record", {"record_id": rid}), thought=f"Looking up record {rid}.")
    variants = []
    for r in range(rng.randint(*span(p["rounds"]))):
        rid = mine[r % len(mine)]
        variant = rng.choice(("revert", "hidden", "hidden"))
        variants.append(variant)
        if variant == "revert":  # change a field, then change it back: the answer is the record as first read
            key = rng.choice(("cabin", "bags", "seats"))
            old = _field(world, b, rid, key)
            new = rng.choice([v for v in _values(key) if v != old])
            b.add(ToolCall("update_record", {"record_id": rid, "field": key, "value": new}),
                  thought=f"Changing {key} on {rid} as asked.")
            b.add(ToolCall("update_record", {"record_id": rid, "field": key, "value": old}),
                  thought=f"The user changed their mind; putting {key} back.")
        else:  # a field the record's summary does not show: the answer equals the read
            key = rng.choice(("payment", "note"))
            value = f"card_{rng.randint(1000, 9999)}" if key == "payment" else f"requested by user #{rng.randint(1, 99)}"
            b.add(ToolCall("update_record", {"record_id": rid, "field": key, "value": value}),
                  thought=f"Updating the {key} of {rid}.")
    if rng.random() < 0.5:
        b.add(ToolCall("cancel_record", {"record_id": mine[-1]}), thought="Cancelling the last one as requested.")
    b.add_productive(rng.randint(0, 2), tools=("calc", "search"))
    return finish(world, b, rng, p, variants=variants)


def _values(key: str) -> tuple[Any, ...]:
    return {"cabin": ("basic", "economy", "business"), "bags": (0, 1, 2, 3), "seats": (1, 2, 3, 4)}[key]


def _field(world: World, b: PathBuilder, rid: str, key: str) -> Any:
    import json

    return json.loads(world.execute(b.ws, ToolCall("get_record", {"record_id": rid})).observation.content)[key]


@family("fresh_suggestions", looping=False, failures=(2, 5), **TREE)
def fresh_suggestions(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """A run of different failing look-ups, each suggesting titles not seen before, then a hit."""
    world, b = start_world(rng)
    b.add_productive(rng.randint(0, 3))
    suggested: list[str] = []
    made, want = 0, rng.randint(*span(p["failures"]))
    for _ in range(400):
        if made >= want:
            break
        entity = render(rng.sample(CONCEPT_NAMES, rng.choice((1, 2, 2, 3))), rng)
        call = ToolCall("wiki_search", {"entity": entity})
        if world.title_match(entity) is not None or not b.gains(call):
            continue
        b.add(call, thought=f"Looking up {entity!r}.")
        suggested = world.similar_titles(entity)
        made += 1
    if made < want or not suggested:
        raise ScriptError("no run of failing look-ups with fresh suggestions")
    b.add(ToolCall("wiki_search", {"entity": rng.choice(suggested)}), thought="One of the suggestions looks right.")
    b.add_productive(rng.randint(0, 2))
    return finish(world, b, rng, p, failures=made)


@family("same_output", looping=False, runs=(3, 5), **TREE)
def same_output(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Different code that prints the same output: a result checked several ways."""
    world, b = start_world(rng)
    b.add_productive(rng.randint(0, 3))
    a, c = rng.randint(3, 60), rng.randint(3, 60)
    value = a * c
    forms = [f"print({a} * {c})", f"x = {a}\ny = {c}\nprint(x * y)", f"print({value})",
             f"total = 0\ntotal = total + {a} * {c}\nprint(total)", f"print({c} * {a})",
             f"n = {value + 7}\nprint(n - 7)", f"print({value * 2} / 2)", f"half = {a} * {c} / 2\nprint(half * 2)"]
    rng.shuffle(forms)
    for code in forms[:rng.randint(*span(p["runs"]))]:
        b.add(ToolCall("run_code", {"code": code}), thought="Let me verify the figure another way.")
    b.add_productive(rng.randint(0, 2))
    return finish(world, b, rng, p, value=value)


@family("scroll_paging", looping=False, pages=(1, 2), **TREE)
def scroll_paging(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """Scrolling a long page screen by screen: the identical call shows new text each time."""
    from ..worldtools import viewports

    world, b = start_world(rng)
    b.add_productive(rng.randint(0, 2))
    args = rng.choice(({}, {"direction": "down"}))
    for _ in range(rng.randint(*span(p["pages"]))):
        url = f"https://www.example.org/{rng.choice(CONCEPT_NAMES)}/{rng.randint(1, 999)}"
        b.add(ToolCall("open_url", {"url": url}), thought=f"Opening {url}.")
        for _ in range(viewports(world.seed, url) - 1):
            b.add(ToolCall("scroll", dict(args)), thought="Not there yet; scrolling down.")
    b.add_productive(rng.randint(0, 2))
    return finish(world, b, rng, p)


def typo(rid: str, rng: random.Random) -> str:
    """An id as a model mistypes it: two characters swapped, or one look-alike."""
    look = {"0": "O", "O": "0", "1": "I", "I": "1", "5": "S", "S": "5", "8": "B", "B": "8", "2": "Z", "Z": "2"}
    for _ in range(20):
        if rng.random() < 0.5:
            i = rng.randrange(len(rid) - 1)
            bad = rid[:i] + rid[i + 1] + rid[i] + rid[i + 2:]
        else:
            i = rng.randrange(len(rid))
            bad = rid[:i] + look.get(rid[i], "X" if rid[i] != "X" else "Y") + rid[i + 1:]
        if bad != rid:
            return bad
    return rid + "X"


@family("corrected_id", looping=False, retries=(1, 3), **TREE)
def corrected_id(rng: random.Random, p: dict[str, Any]) -> Scenario:
    """A call that fails on a mistyped id, retried with the corrected id (among look-ups of other ids)."""
    world, b = start_world(rng)
    ids = list(world.record_ids())
    rng.shuffle(ids)
    valid = set(ids)
    n = rng.randint(*span(p["retries"]))
    looked = ids[:n + rng.randint(0, 2)]
    mistyped = set(rng.sample(range(len(looked)), n))
    for i, rid in enumerate(looked):  # fan-out over the user's records, some ids mistyped first
        bad = typo(rid, rng)
        if i in mistyped and bad not in valid:
            b.add(ToolCall("get_record", {"record_id": bad}), thought=f"Looking up record {bad}.")
            b.add(ToolCall("get_record", {"record_id": rid}), thought=f"Not found; the id is {rid}, retrying.")
        else:
            b.add(ToolCall("get_record", {"record_id": rid}), thought=f"Looking up record {rid}.")
    b.add_productive(rng.randint(0, 2), tools=("calc", "search"))
    return finish(world, b, rng, p)
