"""Closed-loop tasks replay the steps their scenario's generation taped (``sim.play.harness.Tape``)
until their own detector first intervenes: the results must be those of a full simulation."""
from __future__ import annotations

import random

import pytest

from detectors.protocol import Decision, Detector, Verdict
from detectors.registry import available, make_detector
from scenarios.base import make_scenarios, registered
from scenarios.world import World
from sim.execute.tasks import run_both, run_closed
from sim.play.harness import Tape, generate, quiet_play, simulate
from sim.play.openloop import score_episode

MODEL_BACKED = {"embedding", "embedding_call"}  # their verdicts come from vectors; the tape never sees them


def _suite():
    scenarios = make_scenarios([(f, i, {}) for f in sorted(registered()) for i in range(2)], 3)
    tapes = {sc.id: Tape() for sc in scenarios}
    episodes = [generate(sc, tape=tapes[sc.id]) for sc in scenarios]
    return scenarios, tapes, episodes


@pytest.fixture(scope="module")
def suite():
    return _suite()


def _stats(stats):
    for st in stats.values():
        st.check_ns = []  # measured times differ from run to run
    return stats


class RandomGuard(Detector):
    """Answers every verdict at random (seeded): interventions at any point of any path."""

    name = "random_guard"

    def __init__(self, *, seed: int = 0, p: float = 0.15, run_scope: bool = False):
        self.seed, self.p, self.run_scope = seed, p, run_scope
        self.scope = "run" if run_scope else "path"

    def start(self):
        return ()

    def check(self, state, call):
        r = random.Random(f"{self.seed}:{len(state)}:{call.call_id}:{call.tool}")
        if r.random() >= self.p:
            return Decision(Verdict.ALLOW, 0.0)
        return Decision(r.choice([Verdict.NUDGE, Verdict.NUDGE, Verdict.PRUNE, Verdict.ESCALATE, Verdict.STOP]), 1.0,
                        message="stop repeating yourself")

    def record(self, state, call, decision, observation):
        return state + (str(decision.verdict),)


@pytest.mark.parametrize("name", sorted(set(available()) - MODEL_BACKED))
def test_replay_gives_the_full_simulation(suite, name):
    scenarios, tapes, _ = suite
    taped = _stats(run_closed(name, make_detector(name), scenarios, tapes=tapes))
    full = _stats(run_closed(name, make_detector(name), scenarios))
    assert taped == full


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("run_scope", [False, True])
@pytest.mark.parametrize("results_recorded", [True, False])
def test_replay_holds_whatever_the_guard_does(suite, seed, run_scope, results_recorded):
    scenarios, tapes, _ = suite
    guard = RandomGuard(seed=seed, run_scope=run_scope)
    intervened = 0
    for sc in scenarios:
        taped = simulate(sc, guard, tape=tapes[sc.id], results_recorded=results_recorded)
        full = simulate(sc, guard, results_recorded=results_recorded)
        taped.stats.check_ns = full.stats.check_ns = []
        assert taped.stats == full.stats, sc.id
        assert taped.episode.nodes == full.episode.nodes, sc.id
        intervened += bool(full.stats.interventions)
    assert intervened > len(scenarios) // 4  # the guard did intervene, early and late


def test_the_tape_spares_the_world(suite, monkeypatch):
    scenarios, tapes, _ = suite
    calls = []
    real = World.execute
    monkeypatch.setattr(World, "execute", lambda self, state, call: calls.append(1) or real(self, state, call))
    run_closed("exact", make_detector("exact"), scenarios)
    full = len(calls)
    calls.clear()
    run_closed("exact", make_detector("exact"), scenarios, tapes=tapes)
    # exact intervenes in the loop families only, and only after the loop's first repeats.
    assert 0 < len(calls) < full / 3


def test_a_recording_guard_truncates_the_tape():
    # These families' stories need a nudge in the trace: the tape stops at it, and a
    # closed-loop play goes live from there.
    sc = next(s for s in make_scenarios([(f, 0, {}) for f in sorted(registered())], 3) if s.recording_guard)
    tape = Tape()
    generate(sc, tape=tape)
    whole = Tape()
    simulate(sc, None, tape=whole)
    assert 0 < len(tape.steps) < len(whole.steps)
    guard = make_detector("exact")
    a, b = simulate(sc, guard, tape=tape).stats, simulate(sc, guard).stats
    a.check_ns = b.check_ns = []
    assert a == b


# -- the closed loop reusing the open loop's answers (run_both / simulate(scored=)) ---------------
def _both(name, suite, detector=None):
    scenarios, tapes, episodes = suite
    make = (lambda: detector) if detector is not None else (lambda: make_detector(name))
    res, closed, _ = run_both(name, make(), make(), episodes, scenarios, tapes=tapes)
    alone = run_closed(name, make(), scenarios, tapes=tapes)
    return res, _stats(closed), _stats(alone), episodes


@pytest.mark.parametrize("name", sorted(set(available()) - MODEL_BACKED))
def test_closed_loop_reusing_open_answers_gives_the_full_simulation(suite, name):
    res, closed, alone, episodes = _both(name, suite)
    assert closed == alone
    assert {k: [(s.node_id, s.score, s.verdict) for s in v] for k, v in res.scores.items()} == \
        {ep.id: [(s.node_id, s.score, s.verdict) for s in score_episode(make_detector(name), ep)] for ep in episodes}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("run_scope", [False, True])
def test_reuse_holds_whatever_the_guard_does(suite, seed, run_scope):
    _, closed, alone, _ = _both("random_guard", suite, RandomGuard(seed=seed, run_scope=run_scope))
    assert closed == alone


def test_reuse_spares_the_detector(suite):
    scenarios, tapes, episodes = suite

    class Counting(RandomGuard):
        checks = 0

        def check(self, state, call):
            Counting.checks += 1
            return super().check(state, call)

    run_closed("g", Counting(seed=1, p=0.02), scenarios, tapes=tapes)
    alone = Counting.checks
    Counting.checks = 0
    res, closed, _ = run_both("g", Counting(seed=1, p=0.02), Counting(seed=1, p=0.02), episodes, scenarios, tapes=tapes)
    in_open = sum(len(v) for v in res.scores.values())
    # The checks before a play's first intervention come from the open loop; the ones
    # after it are made live.
    assert in_open < Counting.checks < in_open + alone / 2
    # and each reused check is counted with the time it took in open loop
    assert sum(len(st.check_ns) for st in closed.values()) == alone


# -- a detector that lets every call through needs no replay (quiet_play) ----------------------
@pytest.mark.parametrize("name", ["exact", "no_progress", "progress_guard"])
def test_a_quiet_play_is_the_play_it_spares(suite, name):
    scenarios, tapes, episodes = suite
    quiet = loud = 0
    for sc, ep in zip(scenarios, episodes):
        seen = {}
        score_episode(make_detector(name), ep, scored=seen)
        got = quiet_play(sc, tapes[sc.id], seen)
        played = simulate(sc, make_detector(name), tape=tapes[sc.id], scored=seen).stats
        if got is None:
            loud += 1
            continue
        quiet += 1
        assert got == played, sc.id  # check times included: the open loop's, as the play takes them
    assert quiet and loud  # both kinds occur in this suite


def test_no_quiet_play_without_the_whole_unguarded_play_on_tape():
    scenarios = make_scenarios([(f, 0, {}) for f in sorted(registered())], 3)
    cut = 0
    for sc in scenarios:
        tape = Tape()
        ep = generate(sc, tape=tape)
        assert tape.complete == (sc.recording_guard is None or
                                 not any(n.observation is not None and n.observation.nudge for n in ep.tool_nodes())), sc.id
        if not tape.complete:
            cut += 1
            seen = {}
            score_episode(RandomGuard(p=0.0), ep, scored=seen)  # lets every call through
            assert quiet_play(sc, tape, seen) is None  # but where the tape ends, the play goes live
    assert cut
