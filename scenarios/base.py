"""What a scenario is, and the registry of scenario families.

A family is a function ``(rng, params) -> Scenario``; it registers under its canonical
name (SPEC §3) exactly as a user's family would. A scenario is everything needed to
play an episode: the world, the agent's script and persona, and a horizon.
"""
from __future__ import annotations

import os
import random
import sys
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .agents import Script
from .world import World

#: The entry-point group families register in; each entry names a module whose import
#: registers its families with :func:`family` (the built-ins are listed there too).
GROUP = "loopbench.families"


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
    #: The obedient and planner personas' chance to change course after a nudge.
    recover_p: float = 0.7
    #: A guard the harness runs while *recording* the open-loop episode, as
    #: ``(detector name, parameters)``: families whose story needs a nudge in the trace
    #: (evasion, compliant). In closed loop the detector under test is the guard instead.
    recording_guard: tuple[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class FamilyInfo:
    name: str
    looping: bool
    make: Callable[[random.Random, dict[str, Any]], Scenario]
    doc: str
    defaults: dict[str, Any]


FAMILIES: dict[str, FamilyInfo] = {}
_LOADED: list[str] = []  # entry points already imported (built-ins and plug-ins)
# ``sys.path`` with each folder's modification time when the entry points were last read.
_SCANNED: tuple | None = None


def _installed_state() -> tuple:
    """What the installed entry points depend on, cheaply: the import path, and when each of
    its folders last changed (installing a package adds its ``.dist-info`` to one of them)."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, None))
    return tuple(state)


def registered() -> dict[str, FamilyInfo]:
    """Every family: the built-ins and those of installed plug-ins (``loopbench.families``).

    A plug-in that fails to import is reported once as a warning and skipped, so one broken
    package cannot hide the others. The entry points are read again only when the import
    path or one of its folders changed: reading them opens every installed package's
    metadata (about 5 ms), and the validator asks once per episode.
    """
    global _SCANNED
    state = _installed_state()
    if state == _SCANNED:
        return FAMILIES
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        if ep.name in _LOADED:
            continue
        _LOADED.append(ep.name)
        try:
            ep.load()
        except Exception as exc:  # noqa: BLE001 — a broken plug-in must not hide the others
            warnings.warn(f"scenario family plug-in {ep.name!r} ({ep.value}) cannot be loaded: {exc}", stacklevel=2)
    _SCANNED = state
    return FAMILIES


def loop_families() -> list[str]:
    """Registered loop families, in registration order."""
    return [name for name, info in registered().items() if info.looping]


def healthy_families() -> list[str]:
    """Registered healthy families (the negatives), in registration order."""
    return [name for name, info in registered().items() if not info.looping]

#: What each family parameter means (``loopbench families`` prints them). A range
#: ``(lo, hi)`` is drawn uniformly per episode; a single number fixes it.
PARAM_DOCS: dict[str, str] = {
    "prefix": "productive calls before the loop starts (where it starts)",
    "loop_length": "stuck calls before the agent gives up",
    "blip_share": "chance that the loop is a blip: blip_length stuck calls, then the agent goes back to work unprompted",
    "blip_length": "redundant calls of a blip (real blips: 1 or 2)",
    "blip_after": "productive calls after a blip, before the final answer",
    "tree_share": "probability that the episode is a branching tree",
    "branching": "calls per branching turn",
    "depth": "branching turns on the looping path of a tree (nesting depth)",
    "personas": "persona mix the agent is drawn from (matters in closed loop: who recovers after a nudge)",
    "recover_p": "an obedient or planner agent's chance to change course after a nudge",
    "cycle": "calls in the repeated cycle (6-8 is past short-period cycle checks)",
    "nudge_at": "repeats up to and including the one the recording guard nudges",
    "plan_length": "steps of the plan declared up front",
    "sloppy_steps": "finished steps the sloppy re-plan lists again",
    "length": "productive calls in the episode",
    "polls": "polls before the job reports done",
    "failures": "transient errors before the endpoint answers",
    "refinements": "refined queries after the first search",
    "rounds": "edit / re-test rounds",
    "after": "productive calls after the branching turn (or, in compliant, after the nudge)",
    "runs": "runs of different code that print the same output",
    "pages": "long pages opened and scrolled to the end",
    "retries": "look-ups that fail on a mistyped id and are retried with the right one",
    "difficulty": "how hard the headroom family is, 0..1 (what it scales: docs/scenarios.md, headroom families)",
    "queries": "queries paged through to their last page",
}
#: Where a parameter means something else in one family.
FAMILY_PARAM_DOCS: dict[tuple[str, str], str] = {
    ("replan", "prefix"): "plan steps done before the plan goes stale (at most plan_length - 1)",
    ("editor_reproduce_fix", "fixes"): "source files fixed through the editor, each followed by a re-run of the reproduction script",
    ("replan", "loop_length"): "redone (finished) steps before the agent gives up",
    ("compliant", "prefix"): "productive calls before the agent gets stuck",
    ("compliant", "loop_length"): "repeats the agent would make if nothing nudged it (closed loop)",
    ("parallel_burst", "loop_length"): "identical calls proposed in the one turn",
    ("fresh_suggestions", "failures"): "failing look-ups, each suggesting new titles, before a hit",
    ("write_echo", "rounds"): "writes whose answer repeats a record read before",
    ("shell_edit_test", "rounds"): "edit / re-test rounds, all through bash",
}


def param_doc(family_name: str, param: str) -> str:
    return FAMILY_PARAM_DOCS.get((family_name, param), PARAM_DOCS.get(param, ""))
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
    return _scenario(registered(), family_name, index, suite_seed, params)


def make_scenarios(requests: Iterable[tuple[str, int, Mapping[str, Any]]], suite_seed: int = 0) -> list[Scenario]:
    """``make_scenario(family, index, suite_seed, **params)`` for each ``(family, index, params)``,
    with the installed plug-ins looked up once: the entry-point scan reads every installed
    package's metadata, which cost most of generating a suite when done per episode."""
    families = registered()
    return [_scenario(families, name, index, suite_seed, params) for name, index, params in requests]


def _scenario(families: Mapping[str, FamilyInfo], family_name: str, index: int, suite_seed: int,
              params: Mapping[str, Any]) -> Scenario:
    info = families.get(family_name)
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
            # Its text only: the exception's traceback holds this frame, and through the
            # frame's callers a whole run's suite and results, in a cycle that only a full
            # collection frees (1.9 s walking 2.8 million objects after a default run).
            last = str(exc)
    else:
        raise ScriptError(f"{family_name} #{index}: no valid scenario in {MAX_ATTEMPTS} draws ({last})")
    sc.id = f"{family_name}-{suite_seed}-{index:04d}"
    sc.family = family_name
    sc.seed = seed
    return sc
