"""The harness: plays a scenario's agent against its world with a detector in the loop.

With no detector it records the episode as the agent would run unguarded: that is
the open-loop episode, labelled call by call from the world's facts. With a detector
(closed loop) every verdict changes the run: a nudge replaces the observation and the
agent reacts as its persona does, a prune drops the call (a turn whose calls are all
pruned ends its branch), an escalation or a stop ends the episode.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from detectors.protocol import Decision, Detector, Message, Observation, ToolCall, Verdict, unrecorded
from scenarios.agents import Agent, AgentState, Turn
from scenarios.base import Scenario
from scenarios.outcome import FAILURE, OUTCOME_KEY, SUCCESS
from scenarios.world import TOKEN_PRICE, WorldState

from sim.play.openloop import DetectorFailure, Scored, valid_decision
from scenarios.tree import Episode, Label, ThinkNode, ToolNode
from sim.play.watchdog import Watchdog


class LabelError(AssertionError):
    """A generated episode whose world-derived labels disagree with its script."""


@dataclass
class ClosedLoopStats:
    ended: str = "completed"  # completed | gave_up | pruned | stopped | escalated | budget | blocked
    success: bool = False
    executed: int = 0
    wasted_calls: int = 0  # executed calls that gained nothing
    wasted_spend: float = 0.0  # USD: tool prices + tokens of those calls
    spend: float = 0.0
    interventions: Counter = field(default_factory=Counter)  # verdict -> count
    false_interventions: int = 0  # interventions on calls that would have gained something
    check_ns: list[int] = field(default_factory=list)
    detector_error: str | None = None


@dataclass
class SimResult:
    episode: Episode
    stats: ClosedLoopStats
    mismatches: list[str]


class Tape:
    """The pure steps of one play of a scenario, in the order the harness took them: each
    turn the agent proposed, each result the world returned, each state the agent moved to.

    They depend on the detector only through its verdicts: until a guard first refuses a
    call, a guarded play asks the agent and the world exactly what an unguarded one asks,
    in the same order. So :func:`generate` records the episode's steps (up to its
    recording guard's first intervention, if the scenario has one), and every closed-loop
    task of the run replays them instead of simulating the suite again, going live from
    its own detector's first intervention (or where the tape ends). Results are identical
    with and without a tape (tested on every detector without a model, and on a guard that
    answers at random); only the time differs.

    ``complete``: the recorded play ended without an intervention, so the tape holds the
    whole unguarded play (see :func:`quiet_play`); ``unguarded`` keeps that play's stats
    once a quiet play has needed them.
    """

    __slots__ = ("steps", "recorded", "complete", "unguarded")

    def __init__(self) -> None:
        self.steps: list[Any] = []
        self.recorded = False
        self.complete = False
        self.unguarded: ClosedLoopStats | None = None


@dataclass
class _Frame:
    parent: str | None
    agent: AgentState
    world: WorldState
    det: Any
    known: frozenset[str]
    calls: int


def simulate(scenario: Scenario, detector: Detector | None = None, *, recording: bool = False,
             watch: Watchdog | None = None, results_recorded: bool = True, tape: Tape | None = None,
             scored: Mapping[str, Scored] | None = None) -> SimResult:
    """Play ``scenario`` with ``detector`` in the loop (``None``: unguarded).

    ``recording`` marks the detector as the scenario's recording guard: it acts once
    (after its first intervention the run continues unguarded), and it may only nudge a
    call the world says is redundant, or the recorded story would not be the one the
    family tells. ``watch`` marks every detector call for the per-check time limit; a
    detector that returns something other than a ``Decision`` raises ``DetectorFailure``.

    With ``results_recorded=False`` the detector is told that each executed call ran but
    not what it returned (``detectors.protocol.unrecorded``, error flag kept), as a guard
    fed by telemetry without the opt-in results would be; the agent and the episode still
    see the real results. An observation the world itself returns unrecorded is passed on
    as it is.

    ``tape``: an empty :class:`Tape` records this play's steps until the first
    intervention; a recorded one is replayed until this play's first intervention.

    ``scored``: what an open-loop run of the same detector on this scenario's episode gave
    at each node (``score_episode(..., scored=)``). While the play follows the tape and
    the detector has seen what it saw in open loop, it answers as it did there (the
    protocol makes a decision a function of state and call; ``detectors.testing`` checks
    it), so its decision and state are taken from there, with the time its check took
    then. From the first node where anything differs, the detector is asked live.
    """
    watch = watch if watch is not None else Watchdog(None)
    begin, end = watch.begin, watch.end
    agent = Agent(scenario.persona, scenario.seed, scenario.recover_p)
    world = scenario.world
    ep = Episode(scenario.id, scenario.family, scenario.seed, dict(scenario.meta))
    if scenario.scored_from:
        ep.meta["scored_from"] = scenario.scored_from
    stats = ClosedLoopStats()
    mismatches: list[str] = []
    # A recording guard follows the path even if it counts run-wide in a harness: the
    # nudge in the trace must be about this path's own repeats, never a sibling's.
    run_scope = detector is not None and getattr(detector, "scope", "path") == "run" and not recording
    begin()
    run_state = detector.start() if detector is not None else None
    end()
    stack = [_Frame(None, agent.start(scenario.script), WorldState(), run_state, frozenset(), 0)]
    leaf_outcomes: list[tuple[str, bool]] = []
    turn_no = 0
    perf = time.perf_counter_ns

    def check(det_state: Any, call: ToolCall) -> Decision:
        begin()
        t0 = perf()
        d = detector.check(det_state, call)
        stats.check_ns.append(perf() - t0)
        end()
        if not valid_decision(d):
            raise DetectorFailure(f"check() returned {type(d).__name__}, not a Decision")
        return d

    halted: str | None = None
    spent = False
    taped = tape.steps if tape is not None else None
    replaying = tape is not None and tape.recorded
    if tape is not None:
        tape.recorded = True  # what a play that stops early has taped is still a valid prefix
    pos = 0
    following = scored is not None and replaying  # still on the open-loop episode's nodes?

    def step(fn: Any, *args: Any) -> Any:
        # One pure step: from the tape while this play has not diverged from the taped one.
        nonlocal pos, following
        if taped is None or spent:
            following = False
            return fn(*args)
        if replaying:
            if pos < len(taped):
                pos += 1
                return taped[pos - 1]
            following = False
            return fn(*args)
        out = fn(*args)
        taped.append(out)
        return out

    while stack and halted is None:
        fr = stack.pop()
        if fr.calls >= scenario.horizon:
            leaf_outcomes.append(("budget", False))
            continue
        turn = step(agent.propose, fr.agent, f"t{turn_no}-c")
        think = ThinkNode(f"t{turn_no}", fr.parent, Message("assistant", turn.thought, turn.plan))
        turn_no += 1
        ep.add(think)
        det = run_state if run_scope else fr.det
        if detector is not None:
            seen = scored.get(think.id) if following else None
            if seen is not None:
                det = seen.state
            else:
                following = False
                begin()
                det = detector.on_message(det, think.message)
                end()
        if turn.final:
            done = step(agent.observe, fr.agent, turn, ())
            gave_up = fr.agent.looping and not fr.agent.loop_done
            leaf_outcomes.append(("gave_up" if gave_up else ("blocked" if done.failed else "completed"), not done.failed))
            if run_scope:
                run_state = det
            continue
        branch = turn.mode == "branch"
        parent = think.id
        results: list[Observation | None] = []
        children: list[_Frame] = []
        ws, known, ncalls = fr.world, fr.known, fr.calls
        for i, call in enumerate(turn.calls):
            call = ToolCall(call.tool, call.args, call.call_id, call.step, turn_no - 1)
            res = step(world.execute, ws, call)
            is_loop = res.facts <= known
            expected = turn.expect_loop[i] if i < len(turn.expect_loop) else False
            if expected != is_loop:
                mismatches.append(f"{ep.id}: call {call.call_id} {call.tool}({dict(call.args)}) expected "
                                  f"{'loop' if expected else 'progress'} but the world says "
                                  f"{'it gains nothing' if is_loop else 'it gains ' + ', '.join(sorted(res.facts - known))}")
            label = Label(is_loop, (turn.kind or "loop") if is_loop else None)
            # A recording guard is one-shot: after its first intervention the harness
            # records unguarded (the loop it handled is history, what follows is the agent's).
            guarded = detector is not None and not (recording and spent)
            node_id = f"n{turn_no - 1}-{i}"
            seen = scored.get(node_id) if following and guarded else None
            if seen is not None:
                decision = seen.decision
                stats.check_ns.append(seen.check_ns)
            else:
                following = False
                decision = check(det, call) if guarded else None
            verdict = decision.verdict if decision is not None else Verdict.ALLOW
            price = tokens = 0
            if verdict is Verdict.ALLOW:
                obs: Observation | None = res.observation
                price, tokens = res.price, res.tokens
                stats.executed += 1
                spend = price + tokens * TOKEN_PRICE
                stats.spend += spend
                if is_loop:
                    stats.wasted_calls += 1
                    stats.wasted_spend += spend
            else:
                spent = True
                stats.interventions[str(verdict)] += 1
                if not is_loop:
                    stats.false_interventions += 1
                if recording and (not is_loop or verdict is not Verdict.NUDGE):
                    mismatches.append(f"{ep.id}: the recording guard answered {verdict} on call {call.call_id} "
                                      f"{call.tool}({dict(call.args)}), which {'is redundant' if is_loop else 'gains something'}")
                obs = Observation(decision.message or decision.reason or "Call refused by the loop guard.", nudge=True) \
                    if verdict is Verdict.NUDGE else None
                if obs is not None:
                    tokens = len(obs.content) // 4
            node = ToolNode(node_id, parent, call, obs, label, price, tokens)
            ep.add(node)
            if guarded:
                told = obs if results_recorded or obs is None or obs.nudge else unrecorded(obs.error)
                if seen is not None and told == seen.observation:
                    det_after = seen.state
                else:
                    following = False
                    begin()
                    det_after = detector.record(det, call, decision, told)
                    end()
            else:
                det_after = det
            if verdict in (Verdict.ESCALATE, Verdict.STOP):
                halted = "escalated" if verdict is Verdict.ESCALATE else "stopped"
                break
            results.append(obs)
            if branch:
                if obs is not None:
                    child_agent = step(_branch_state, agent, fr.agent, turn, i, obs)
                    child_ws = res.state if verdict is Verdict.ALLOW else ws
                    child_known = known | res.facts if verdict is Verdict.ALLOW else known
                    children.append(_Frame(node.id, child_agent, child_ws, None if run_scope else det_after,
                                           child_known, ncalls + 1))
                if run_scope:
                    det = det_after
            else:
                det = det_after
                if obs is not None:
                    parent = node.id
                    ncalls += 1
                    if verdict is Verdict.ALLOW:
                        ws, known = res.state, known | res.facts
        if run_scope:
            run_state = det
        if halted:
            break
        if branch:
            if not children:
                leaf_outcomes.append(("pruned", False))
            stack.extend(reversed(children))
        else:
            if turn.calls and all(r is None for r in results):
                # The seed's rule: a turn whose calls were all pruned completes with no children.
                leaf_outcomes.append(("pruned", False))
                continue
            stack.append(_Frame(parent, step(agent.observe, fr.agent, turn, results), ws, None if run_scope else det, known, ncalls))
    if halted:
        stats.ended, stats.success = halted, False
    elif leaf_outcomes:
        # The episode succeeds when every path finished its work.
        stats.success = all(ok for _, ok in leaf_outcomes)
        bad = [o for o, ok in leaf_outcomes if not ok]
        stats.ended = bad[0] if bad else "completed"
    if tape is not None and not replaying:
        tape.complete = not spent  # a halt is an intervention too
    return SimResult(ep, stats, mismatches)


def quiet_play(scenario: Scenario, tape: Tape, scored: Mapping[str, Scored]) -> ClosedLoopStats | None:
    """The closed-loop stats of a detector that let every call of the scenario's episode
    through, without playing the scenario again; ``None`` when that cannot be known here.

    ``scored`` is the open-loop run of the detector on the whole episode (every node). When
    the tape is ``complete``, that episode is the whole unguarded play, and a closed-loop
    play that follows it gets the detector's open-loop answers at every node
    (:func:`simulate` with ``scored=``): all of them ``allow``, so it never leaves the tape
    and ends as the unguarded play ends, with the open-loop check times. On the default
    suite more than half of all (detector, episode) pairs are such; their closed loop then
    costs a lookup instead of a replay.
    """
    if not tape.complete:
        return None
    check_ns = []
    for seen in scored.values():
        decision = seen.decision
        if decision is not None:  # a tool call (thoughts have no decision)
            if decision.verdict is not Verdict.ALLOW:
                return None
            check_ns.append(seen.check_ns)
    if tape.unguarded is None:
        tape.unguarded = simulate(scenario, None, tape=tape).stats
    return replace(tape.unguarded, interventions=Counter(), check_ns=check_ns)


def _branch_state(agent: Agent, state: AgentState, turn: Turn, i: int, obs: Observation) -> AgentState:
    return agent.enter_branch(agent.observe(state, _single(turn, i), (obs,)), i)


def _single(turn: Turn, i: int) -> Turn:
    return Turn(turn.thought, (turn.calls[i],), "join", (turn.expect_loop[i],) if i < len(turn.expect_loop) else (False,),
                turn.kind, turn.plan)


def generate(scenario: Scenario, validate: bool = True, tape: Tape | None = None) -> Episode:
    """The open-loop episode of a scenario: the agent unguarded (or under the scenario's
    recording guard), labels from the world.

    With ``validate`` a disagreement between the script's intent and the world's facts
    raises ``LabelError`` naming every offending call. An empty ``tape`` records the
    play's steps for the closed-loop tasks to replay.
    """
    guard = None
    if scenario.recording_guard is not None:
        from detectors.registry import make_detector

        name, params = scenario.recording_guard
        guard = make_detector(name, **params)
    res = simulate(scenario, guard, recording=True, tape=tape)
    # The world knows how the recorded run ended (SPEC §11): every path finished its work, or not.
    res.episode.meta[OUTCOME_KEY] = SUCCESS if res.stats.success else FAILURE
    if guard is not None:
        res.episode.meta["recording_guard"] = {"detector": scenario.recording_guard[0], **scenario.recording_guard[1]}
    if validate and res.mismatches:
        raise LabelError(f"{len(res.mismatches)} label(s) disagree with the world:\n" + "\n".join(res.mismatches[:20]))
    return res.episode
