"""Open-loop replay: a fixed episode, every proposed call scored by a detector.

Path-scoped detectors extend their parent's state at every node, so each branch sees
only its own path; run-scoped detectors get one state threaded through the calls in
execution order. Nothing about the episode changes: in open loop a verdict is only
recorded, and the call's real observation is what the detector learns from — ``None``
for a call that never ran, ``recorded=False`` for one that ran without a recorded result.
"""
from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

from detectors.protocol import Decision, Detector, Observation, Verdict

from scenarios.tree import Episode, ThinkNode, ToolNode
from sim.scoring.outcomes import CallScore
from sim.play.watchdog import CheckTimeout, Watchdog


class DetectorFailure(Exception):
    """A detector raised or returned garbage; carries a one-line description."""


def describe(exc: BaseException) -> str:
    """One line naming an exception, even one whose ``__str__`` raises."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001
        text = type(exc).__name__
    return text.splitlines()[0][:300] if text.strip() else type(exc).__name__


def valid_decision(decision: Any) -> bool:
    return isinstance(decision, Decision) and isinstance(decision.verdict, Verdict) and isinstance(decision.score, (int, float))


class Scored(NamedTuple):
    """What the open-loop run gave at one node, for the closed loop to reuse
    (``sim.play.harness.simulate``): the decision (``None`` for a thought), the state after
    the node, the check's own time, and the observation the detector was told."""

    decision: Decision | None
    state: Any
    check_ns: int
    observation: Observation | None


def score_episode(detector: Detector, episode: Episode, watch: Watchdog | None = None,
                  scored: dict[str, Scored] | None = None) -> list[CallScore]:
    """Score every tool call of ``episode`` in trace order; ``scored`` (a dict to fill)
    keeps each node's :class:`Scored`.

    Raises ``DetectorFailure`` if the detector raises or returns something that is not a
    ``Decision``, or if one of its calls overruns ``watch``'s limit (``sim.play.watchdog``);
    the caller decides how that episode is scored.
    """
    watch = watch if watch is not None else Watchdog(None)
    begin, end = watch.begin, watch.end
    run_scope = getattr(detector, "scope", "path") == "run"
    perf = time.perf_counter_ns
    out: list[CallScore] = []
    try:
        begin()
        start_state = detector.start()
        end()
        state_after: dict[str | None, Any] = {None: start_state}
        depth_after: dict[str | None, int] = {None: 0}
        run_state = start_state
        call_index = 0
        for node in episode.nodes:
            parent = node.parent
            state = run_state if run_scope else state_after[parent]
            depth = depth_after[parent]
            if isinstance(node, ThinkNode):
                begin()
                new_state = detector.on_message(state, node.message)
                end()
                new_depth = depth
                if scored is not None:
                    scored[node.id] = Scored(None, new_state, 0, None)
            else:
                call = node.call
                begin()
                t0 = perf()
                decision = detector.check(state, call)
                t1 = perf() if scored is not None else 0  # the check's own time, only when kept
                new_state = detector.record(state, call, decision, node.observation)
                elapsed = perf() - t0
                end()
                if not valid_decision(decision):
                    raise DetectorFailure(f"check() returned {type(decision).__name__}, not a Decision")
                score = float(decision.score)
                if score != score:  # NaN
                    raise DetectorFailure(f"check() returned a NaN score on call {node.call.call_id!r}")
                out.append(CallScore(node.id, call_index, depth, score, decision.verdict, elapsed))
                if scored is not None:
                    scored[node.id] = Scored(decision, new_state, t1 - t0, node.observation)
                call_index += 1
                new_depth = depth + 1
            if run_scope:
                run_state = new_state
            else:
                state_after[node.id] = new_state
            depth_after[node.id] = new_depth
    except DetectorFailure:
        raise
    except CheckTimeout as exc:
        raise DetectorFailure(str(exc)) from None
    except Exception as exc:  # a third-party detector may raise anything
        raise DetectorFailure(describe(exc)) from exc
    finally:
        end()
    return out


def walk_tree(detector: Detector, episode: Episode, on_call: Callable[[Any, ToolNode], Any]) -> None:
    """Feed ``episode`` to ``detector`` as :func:`score_episode` does, without its timing and
    checks: each node gets the state after its parent (one threaded state for a run-scoped
    detector), a thought goes to ``on_message``, and ``on_call(state, node)`` returns the
    state after a tool node (benchmarks time the detector's calls inside it)."""
    run_scope = getattr(detector, "scope", "path") == "run"
    state_after: dict[str | None, Any] = {None: detector.start()}
    run_state = state_after[None]
    for node in episode.nodes:
        state = run_state if run_scope else state_after[node.parent]
        if isinstance(node, ThinkNode):
            new_state = detector.on_message(state, node.message)
        else:
            new_state = on_call(state, node)
        state_after[node.id] = run_state = new_state


def path_calls(episode: Episode) -> list[list[ToolNode]]:
    """The tool calls of every root-to-leaf path, in order."""
    return [[n for n in path if isinstance(n, ToolNode)] for path in episode.paths()]
