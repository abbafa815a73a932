"""The quick suite's scripted agents played through each framework's real agent loop (the persona
as its scripted model, the world's tools as its tools, the guard through the adapter) give the
closed-loop outcome the built-in harness gives, scenario by scenario, or differ for one of the
framework behaviours docs/adapters.md names (and only where that behaviour comes into play)."""
from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")
pytest.importorskip("langchain.agents")

from detectors.protocol import Decision, Verdict  # noqa: E402
from detectors.registry import make_detector  # noqa: E402
from scenarios.suites import load_suite  # noqa: E402
from sim.execute.runner import build_scenarios  # noqa: E402
from sim.play.frameworks import CONCURRENT, HARNESSES, Unsupported, linear, play, play_pydantic_ai, play_run, reasons_to_differ  # noqa: E402,E501
from sim.play.harness import simulate  # noqa: E402

FRAMEWORKS = [h for h in HARNESSES if h != "builtin"]
def quick(episodes: int = 2):
    suite = load_suite("quick")
    return build_scenarios(suite.families, episodes, suite.seed, suite.family_params, suite.family_weights)


def outcome(stats):
    return (stats.ended, stats.success, stats.executed, stats.wasted_calls, round(stats.spend, 9),
            dict(stats.interventions), stats.false_interventions)


@pytest.mark.parametrize("harness", FRAMEWORKS)
def test_unguarded_plays_are_the_built_in_harness_plays(harness):
    played = 0
    for sc in quick():
        if not linear(sc):
            continue
        assert outcome(play(harness, sc, None)) == outcome(simulate(sc, None).stats), sc.id
        played += 1
    assert played >= 50


@pytest.mark.parametrize("detector", ["progress_guard", "exact", "max_turns"])
@pytest.mark.parametrize("harness", FRAMEWORKS)
def test_guarded_plays_match_or_differ_for_a_documented_reason(harness, detector):
    same, differs = 0, {}
    for sc in quick():
        if not linear(sc):
            continue
        run = play_run(harness, sc, make_detector(detector))
        framework, builtin = run.stats, simulate(sc, make_detector(detector))
        if outcome(framework) == outcome(builtin.stats):
            same += 1
            continue
        reasons = reasons_to_differ(harness, builtin, run)
        assert reasons, f"{sc.id}: {outcome(framework)} in {harness}, {outcome(builtin.stats)} built in"
        if reasons == ["prune"]:  # the built-in harness ends a path whose calls are all pruned
            assert framework.ended != "pruned" and framework.interventions["prune"] >= 1, sc.id
        differs[reasons[0]] = differs.get(reasons[0], 0) + 1
    assert same >= 25
    if harness == "pydantic-ai" and detector != "exact":
        assert differs == {}  # sequential tools, errors as ModelRetry, turns from run_step: all identical
    if detector == "exact":
        assert differs.get("prune", 0) >= 10  # exact prunes: the one difference every framework shares


class Recording:
    """A detector wrapper that logs the order of its checks and records."""

    def __init__(self, inner):
        self.inner, self.log, self.turns = inner, [], []
        self.name = inner.name

    def start(self):
        return self.inner.start()

    def check(self, state, call) -> Decision:
        self.log.append("check")
        self.turns.append(call.turn)
        return self.inner.check(state, call)

    def record(self, state, call, decision, obs):
        self.log.append("record")
        return self.inner.record(state, call, decision, obs)

    def on_message(self, state, message):
        return self.inner.on_message(state, message)


@pytest.mark.parametrize("harness", FRAMEWORKS)
def test_concurrent_frameworks_check_a_burst_before_recording_it(harness):
    """What "concurrent" means above, shown: a turn of several calls is checked call by call
    with each result recorded in between in pydantic-ai (sequential tools) and in the built-in
    harness; the Agents SDK and LangChain check the later calls before the first one's result."""
    sc = next(s for s in quick(1) if s.family == "parallel_burst")
    det = Recording(make_detector("exact", max_repeats_per_signature=100))  # allows everything
    play(harness, sc, det)
    interleaved = "check,check" in ",".join(det.log)
    assert interleaved == (harness in CONCURRENT)
    assert det.log.count("check") == det.log.count("record") > 2
    # Each adapter tells the guard which model response proposed a call: the burst's calls share one.
    assert None not in det.turns and det.turns == sorted(det.turns)
    assert 1 < len(set(det.turns)) < len(det.turns)


def test_a_halt_ends_the_framework_run_with_the_guard_reason():
    def one_call_turns(sc):  # its first three calls each in a turn of its own
        nodes = simulate(sc, None).episode.tool_nodes()[:3]
        return len(nodes) == 3 and len({n.call.turn for n in nodes}) == 3

    sc = next(s for s in quick(1) if linear(s) and one_call_turns(s))

    class Halter:
        name = "halter"

        def start(self):
            return 0

        def check(self, state, call):
            return Decision(Verdict.STOP, 1.0, reason="test halt") if state >= 2 else Decision(Verdict.ALLOW, 0.0)

        def record(self, state, call, decision, obs):
            return state + 1

        def on_message(self, state, message):
            return state

    for harness in FRAMEWORKS:
        stats = play(harness, sc, Halter())
        assert (stats.ended, stats.success, stats.executed, dict(stats.interventions)) == \
            ("stopped", False, 2, {"stop": 1}), harness


def test_branching_scenarios_are_refused_not_faked():
    branching = [sc for sc in quick() if not linear(sc)]
    assert branching  # the quick suite has some (healthy trees, branch_siblings)
    for harness in FRAMEWORKS:
        with pytest.raises(Unsupported, match="branching scenario"):
            play(harness, branching[0], make_detector("progress_guard"))
    with pytest.raises(Unsupported):
        play_pydantic_ai(branching[0], None)
