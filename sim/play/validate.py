"""The label validator: every generated episode checked against the world, loudly.

``generate`` already refuses an episode whose labels disagree with its script. This
module re-derives every label independently, by replaying each recorded path through
the scenario's world from scratch, and checks what the scorer relies on: a looping
family's episodes have a looping path (a healthy family's have none) in the scored part,
every loop label there carries the family's kind, and the onset of each looping path is
its first redundant call. ``validate_suite`` runs it over a whole suite, in a process
pool when asked.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from scenarios.base import Scenario, make_scenario, registered
from scenarios.suites import episode_count
from scenarios.world import WorldState

from sim.forking import each, map_forked
from sim.play.harness import LabelError, generate
from scenarios.tree import Episode, ToolNode


@dataclass(frozen=True)
class Checked:
    episode: str
    family: str
    calls: int
    looping_paths: int


def scored_looping_paths(episode: Episode) -> list[tuple[list[ToolNode], int]]:
    """Each looping path's calls and onset (its first loop-labelled call in the scored part)."""
    scored_from = int(episode.meta.get("scored_from", 0) or 0)
    index = episode.call_index()
    out = []
    for path in episode.paths():
        calls = [n for n in path if isinstance(n, ToolNode)]
        onset = next((i for i, n in enumerate(calls)
                      if index[n.id] >= scored_from and n.label is not None and n.label.loop), None)
        if onset is not None:
            out.append((calls, onset))
    return out


def validate_episode(scenario: Scenario, episode: Episode) -> Checked:
    """Raise ``LabelError`` naming the first problem; return what was checked."""
    info = registered().get(scenario.family)
    problems: list[str] = []
    # Replay: each executed call runs in its parent's world state; a nudged call is
    # judged as if it had run but changes nothing (the harness never executed it).
    state: dict[str | None, tuple[WorldState, frozenset[str]]] = {None: (WorldState(), frozenset())}
    for node in episode.nodes:
        ws, known = state[node.parent]
        if isinstance(node, ToolNode):
            res = scenario.world.execute(ws, node.call)
            redundant = res.facts <= known
            if node.label is None or node.label.loop != redundant:
                problems.append(f"{episode.id}: call {node.id} {node.call.tool}({dict(node.call.args)}) is labelled "
                                f"{node.label} but the world says it {'gains nothing' if redundant else 'gains something'}")
            executed = node.observation is not None and not node.observation.nudge
            state[node.id] = (res.state, known | res.facts) if executed else (ws, known)
        else:
            state[node.id] = (ws, known)
    paths = scored_looping_paths(episode)
    scored_from = int(episode.meta.get("scored_from", 0) or 0)
    index = episode.call_index()
    if info is not None and bool(paths) != info.looping:
        problems.append(f"{episode.id}: a {'looping' if info.looping else 'healthy'} family's episode has "
                        f"{len(paths)} looping path(s) in its scored part")
    for calls, onset in paths:
        if any(n.label.loop for n in calls[:onset] if index[n.id] >= scored_from):
            problems.append(f"{episode.id}: a loop label before the onset at {onset}")
        if info is not None and info.looping:
            kinds = {n.label.kind for n in calls if n.label.loop and index[n.id] >= scored_from}
            if kinds != {scenario.family}:
                problems.append(f"{episode.id}: loop labels of kind(s) {sorted(map(str, kinds))}, "
                                f"expected {scenario.family!r}")
    if problems:
        raise LabelError(f"{len(problems)} problem(s):\n" + "\n".join(problems[:20]))
    return Checked(episode.id, scenario.family, len(episode.tool_nodes()), len(paths))


def _one(job: tuple[str, int, int, dict]) -> Checked:
    family, index, seed, params = job
    sc = make_scenario(family, index, seed, **params)
    return validate_episode(sc, generate(sc))


def validate_suite(families: Sequence[str], episodes: int, seed: int = 0,
                   family_params: dict[str, dict] | None = None, workers: int = 1,
                   indices: Iterable[int] | None = None, weights: dict[str, float] | None = None) -> list[Checked]:
    """Generate and validate every episode of a suite (or the given ``indices`` of each
    family, among the episodes its ``weights`` give it); the first bad episode raises ``LabelError``."""
    params = family_params or {}
    idx = set(indices) if indices is not None else None
    jobs = [(f, i, seed, params.get(f, {})) for f in families
            for i in range(episode_count(episodes, (weights or {}).get(f, 1.0))) if idx is None or i in idx]
    return map_forked(_one, each(jobs), workers, chunksize=64)
