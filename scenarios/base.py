"""What a scenario is, and the registry of scenario families.

A family is a function ``(rng, params) -> Scenario``; it registers under its canonical
name (SPEC §3) exactly as a user's family would. A scenario is everything needed to
play an episode: the world, the agent's script and persona, and a horizon.
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from .agents import Script
from .world import World

LOOP_FAMILIES = ("stale", "cosmetic", "paraphrased", "drift", "cycle", "no_progress", "same_error",
                 "parallel_burst", "replan", "evasion")
HEALTHY_FAMILIES = ("healthy", "same_tool", "polling", "transient_retry", "refinement", "edit_test",
                    "branch_siblings", "compliant", "long_horizon")


@dataclass
class Scenario:
    id: str
    family: str
    seed: int
    world: World
    script: Script
    persona: str = "diligent"
    horizon: int = 60  # most tool calls on one path
    meta: dict[str, Any] = field(default_factory=dict)
    #: Calls before this index are history the agent brings along (e.g. a loop a guard
    #: already handled); the scorer judges only what comes after.
    scored_from: int = 0


@dataclass(frozen=True)
class FamilyInfo:
    name: str
    looping: bool
    make: Callable[[random.Random, dict[str, Any]], Scenario]
    doc: str
    defaults: dict[str, Any]


FAMILIES: dict[str, FamilyInfo] = {}
MAX_ATTEMPTS = 20


def family(name: str, *, looping: bool, **defaults: Any):
    """Register a scenario family under its canonical name, with its parameter defaults."""

    def deco(fn: Callable[[random.Random, dict[str, Any]], Scenario]):
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        FAMILIES[name] = FamilyInfo(name, looping, fn, doc, dict(defaults))
        return fn

    return deco


def episode_seed(suite_seed: int, family_name: str, index: int) -> int:
    """A stable per-episode seed: the same (suite seed, family, index) always gives it."""
    return zlib.crc32(f"{suite_seed}:{family_name}:{index}".encode()) & 0x7FFFFFFF


def make_scenario(family_name: str, index: int, suite_seed: int = 0, **params: Any) -> Scenario:
    info = FAMILIES.get(family_name)
    if info is None:
        raise KeyError(f"unknown scenario family {family_name!r} (known: {', '.join(sorted(FAMILIES))})")
    seed = episode_seed(suite_seed, family_name, index)
    merged = {**info.defaults, **params}
    unknown = set(params) - set(info.defaults)
    if unknown:
        raise KeyError(f"family {family_name!r} has no parameter(s) {', '.join(sorted(unknown))}")
    from .families.builder import ScriptError

    for attempt in range(MAX_ATTEMPTS):
        # A draw the world cannot support (no fresh query left, say) is redrawn from a
        # seed derived deterministically from this one.
        try:
            sc = info.make(random.Random(seed if attempt == 0 else f"{seed}:{attempt}"), merged)
            break
        except ScriptError as exc:
            last = exc
    else:
        raise ScriptError(f"{family_name} #{index}: no valid scenario in {MAX_ATTEMPTS} draws ({last})")
    sc.id = f"{family_name}-{suite_seed}-{index:04d}"
    sc.family = family_name
    sc.seed = seed
    return sc
