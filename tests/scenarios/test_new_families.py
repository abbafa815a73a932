"""evasion, compliant, replan, and the parameters every family takes."""
from collections import Counter

import pytest

import scenarios.families  # noqa: F401
from detectors.exact import ExactDetector
from detectors.normalized import NormalizedDetector
from detectors.planner import PlannerDetector
from scenarios.base import FAMILIES, make_scenario
from sim.play.harness import generate, simulate
from sim.play.openloop import score_episode
from sim.scoring.outcomes import alarms_from, episode_outcomes
from scenarios.tree import ThinkNode, ToolNode
from sim.play.validate import scored_looping_paths, validate_episode


def _calls(ep):
    return [n for n in ep.nodes if isinstance(n, ToolNode)]


def test_evasion_trace_shows_the_nudge_then_rewordings():
    for i in range(10):
        sc = make_scenario("evasion", i, tree_share=0.0)
        ep = generate(sc)
        calls = _calls(ep)
        nudged = [k for k, n in enumerate(calls) if n.observation.nudge]
        assert len(nudged) == 1, "the one-shot recording guard nudges exactly once"
        k = nudged[0]
        onset = next(j for j, n in enumerate(calls) if n.label.loop)
        assert k == onset + sc.meta["nudge_at"] - 1
        before, after = calls[k], calls[k + 1:]
        assert after and all(n.label.loop and n.label.kind == "evasion" for n in after)
        # Reworded: every later query differs from the nudged one after normalisation.
        norm = lambda c: " ".join(str(c.args["query"]).lower().split())  # noqa: E731
        assert all(norm(n.call) != norm(before.call) for n in after)
        assert ep.meta["recording_guard"] == {"detector": "normalized", "threshold": sc.meta["nudge_at"] + 1}


def test_evasion_in_closed_loop_uses_the_detector_under_test_not_the_recording_guard():
    sc = make_scenario("evasion", 0, tree_share=0.0)
    unguarded = simulate(sc, None)
    assert not any(n.observation.nudge for n in _calls(unguarded.episode))
    res = simulate(sc, NormalizedDetector())  # threshold 3
    nudges = [n for n in _calls(res.episode) if n.observation is not None and n.observation.nudge]
    assert nudges and not res.stats.success  # the evasive agent rewords past the guard
    after = _calls(res.episode)[_calls(res.episode).index(nudges[0]) + 1:]
    assert after and all(n.call.args["query"] != nudges[0].call.args["query"] for n in after)


def test_compliant_history_is_not_scored_and_the_recovery_is_healthy():
    seen_variants = Counter()
    for i in range(20):
        sc = make_scenario("compliant", i)
        ep = generate(sc)
        seen_variants[sc.meta["variant"]] += 1
        calls = ep.tool_nodes()
        assert ep.meta["scored_from"] == sc.scored_from
        nudged = [k for k, n in enumerate(calls) if n.observation.nudge]
        assert nudged == [sc.scored_from - 1], "history ends with the nudged call"
        assert any(n.label.loop for n in calls[:sc.scored_from])
        assert not any(n.label.loop for n in calls[sc.scored_from:])
        assert not scored_looping_paths(ep)
        assert [o.outcome for o in episode_outcomes(ep, {})] == ["tn"]
    assert set(seen_variants) == {"file", "search"}


def test_compliant_traps_a_guard_that_acts_on_stale_evidence():
    fp = 0
    for i in range(20):
        ep = generate(make_scenario("compliant", i, tree_share=0.0))
        outs = episode_outcomes(ep, alarms_from(score_episode(ExactDetector(), ep)))
        fp += outs[0].outcome == "fp"
    assert fp >= 5  # re-reading after a write, the next page of the same search


def test_compliant_agent_recovers_in_closed_loop_when_nudged():
    sc = make_scenario("compliant", 1, tree_share=0.0)
    res = simulate(sc, NormalizedDetector())
    assert res.stats.interventions["nudge"] >= 1 and res.stats.ended != "gave_up"
    unguarded = simulate(sc, None)
    assert unguarded.stats.ended == "gave_up"


def test_replan_declares_a_plan_and_the_planner_refuses_the_redo_at_its_onset():
    caught = 0
    for i in range(20):
        sc = make_scenario("replan", i)
        ep = generate(sc)
        plans = [n.message.plan for n in ep.nodes if isinstance(n, ThinkNode) and n.message.plan]
        assert len(plans) >= 2, "a plan up front and a sloppy re-plan"
        first_plan, replan = plans[0], plans[-1]
        calls = ep.tool_nodes()
        assert calls[0].call.step == first_plan[0]
        done = {n.call.step for n in calls if not n.label.loop}
        assert set(replan) & done, "the re-plan lists a finished step again"
        scores = score_episode(PlannerDetector(), ep)
        by_id = {s.node_id: s for s in scores}
        for path_calls, onset in scored_looping_paths(ep):
            redo = path_calls[onset]
            assert redo.call.step in done and redo.label.kind == "replan"
            assert by_id[redo.id].verdict.value == "nudge"
            assert not any(by_id[n.id].verdict.value != "allow" for n in path_calls[:onset])
            caught += 1
    assert caught >= 20


def test_planner_redirect_lets_the_planner_persona_finish_its_plan():
    sc = make_scenario("replan", 2, tree_share=0.0, recover_p=1.0)
    res = simulate(sc, PlannerDetector())
    assert res.stats.interventions["nudge"] == 1 and res.stats.success


@pytest.mark.parametrize("k", [2, 5, 6, 8])
def test_cycle_lengths_up_to_eight(k):
    ep = generate(make_scenario("cycle", 0, cycle=(k, k), tree_share=0.0))
    assert ep.meta["cycle"] == k
    (calls, onset), = scored_looping_paths(ep)
    loop = [(n.call.tool, tuple(sorted(n.call.args.items()))) for n in calls[onset:]]
    assert len(set(loop)) == k and loop[:k] == loop[k:2 * k]


def test_trees_of_depth_two_branch_twice_on_the_looping_path():
    for name in ("stale", "drift", "evasion", "replan"):
        sc = make_scenario(name, 3, tree_share=1.0, depth=(2, 2), branching=3)
        ep = generate(sc)
        validate_episode(sc, ep)
        (calls, onset), = scored_looping_paths(ep)
        branching_turns = [n for n in ep.nodes if isinstance(n, ThinkNode) and len(ep.children.get(n.id, [])) == 3]
        assert len(branching_turns) >= 2 and len(ep.leaves()) == 5


def test_persona_mix_shows_in_the_closed_loop():
    personas, recovered = Counter(), 0
    for i in range(30):
        sc = make_scenario("stale", i, tree_share=0.0, recover_p=1.0, blip_share=0.0)
        personas[sc.persona] += 1
        res = simulate(sc, NormalizedDetector())
        if sc.persona == "obedient":
            recovered += res.stats.success
        else:
            assert not res.stats.success
    assert personas["obedient"] and personas["stubborn"] and recovered == personas["obedient"]
    # Open loop does not depend on the persona mix: no nudges, no recovery.
    a = generate(make_scenario("stale", 4, personas=("stubborn",)))
    b = generate(make_scenario("stale", 4, personas=("obedient",)))
    assert [n.call for n in a.tool_nodes()] == [n.call for n in b.tool_nodes()]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_documents_its_parameters(name):
    from scenarios.base import param_doc

    assert FAMILIES[name].doc
    assert all(param_doc(name, k) for k in FAMILIES[name].defaults)


def test_families_command_prints_parameters(tmp_path):
    from click.testing import CliRunner

    from sim.cli import main

    out = CliRunner().invoke(main, ["families", "cycle", "evasion"])
    assert out.exit_code == 0, out.output
    assert "cycle (loop)" in out.output and "2-8" in out.output and "nudge_at" in out.output
    bad = CliRunner().invoke(main, ["families", "nope"])
    assert bad.exit_code == 2 and "unknown scenario families: nope" in bad.output


def test_nudges_history_and_plans_survive_the_trace_format(tmp_path):
    from scenarios.trace import read_trace, write_trace

    eps = [generate(make_scenario(f, i)) for f in ("evasion", "compliant", "replan") for i in range(4)]
    write_trace(tmp_path / "t.jsonl", eps)
    back = {e.id: e for e in read_trace(tmp_path / "t.jsonl").episodes}
    for ep in eps:
        got = back[ep.id]
        assert got.family == ep.family and got.meta.get("scored_from") == ep.meta.get("scored_from")
        assert [n.observation.nudge for n in got.tool_nodes()] == [n.observation.nudge for n in ep.tool_nodes()]
        assert [n.call.step for n in got.tool_nodes()] == [n.call.step for n in ep.tool_nodes()]
        assert [o.outcome for o in episode_outcomes(got, {})] == [o.outcome for o in episode_outcomes(ep, {})]
        plans = lambda e: [n.message.plan for n in e.nodes if isinstance(n, ThinkNode) and n.message.plan]  # noqa: E731
        assert plans(got) == plans(ep)


def test_long_cycles_are_past_gemini_clis_cycle_check():
    from detectors.registry import make_detector

    def fired(k):
        eps = [generate(make_scenario("cycle", i, cycle=(k, k), tree_share=0.0, blip_share=0.0)) for i in range(4)]
        return sum(any(s.verdict.value != "allow" for s in score_episode(make_detector("gemini_cli"), ep)) for ep in eps)

    assert fired(3) == 4 and fired(7) == 0
