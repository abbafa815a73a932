"""Scenario families: deterministic per seed, labels right by construction and validated."""
import pytest

import scenarios.families  # noqa: F401
from scenarios.base import FAMILIES, healthy_families, loop_families, make_scenario, registered
from scenarios.world import World
from sim.play.harness import LabelError, generate, simulate
from scenarios.trace import dumps_events, episode_events
from scenarios.tree import ToolNode
from sim.play.validate import scored_looping_paths

from scenarios.agents import Intent, Script
from scenarios.base import Scenario
from detectors.protocol import ToolCall


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_generates_valid_labelled_episodes(name):
    info = FAMILIES[name]
    for i in range(12):
        ep = generate(make_scenario(name, i, suite_seed=3))  # raises LabelError on any disagreement
        nodes = ep.tool_nodes()
        assert nodes and all(n.label is not None for n in nodes)
        assert bool(scored_looping_paths(ep)) == info.looping, f"{name} #{i}"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_generation_is_deterministic_per_seed(name):
    a = dumps_events(episode_events(generate(make_scenario(name, 5, suite_seed=9))))
    b = dumps_events(episode_events(generate(make_scenario(name, 5, suite_seed=9))))
    c = dumps_events(episode_events(generate(make_scenario(name, 6, suite_seed=9))))
    assert a == b and a != c


def test_onset_is_the_first_call_that_gains_nothing():
    for i in range(10):
        ep = generate(make_scenario("stale", i))
        for path in ep.paths():
            calls = [n for n in path if isinstance(n, ToolNode)]
            flags = [n.label.loop for n in calls]
            if any(flags):
                onset = flags.index(True)
                assert not any(flags[:onset])


def test_a_script_whose_intent_contradicts_the_world_fails_loudly():
    world = World.build(1)
    path = sorted(world.files)[0]
    read = ToolCall("read_file", {"path": path})
    # The author claims the second read is progress; the world says it gains nothing.
    script = Script((Intent((read,)), Intent((read,))))
    with pytest.raises(LabelError, match="expected progress but the world says it gains nothing"):
        generate(Scenario("bad", "healthy", 0, world, script))


def test_families_cover_spec_section_3():
    assert set(loop_families()) | set(healthy_families()) == set(registered())


def test_trees_really_branch():
    ep = generate(make_scenario("branch_siblings", 0, branching=3))
    assert len(ep.leaves()) == 3 and not ep.is_linear()
    looped_trees = [generate(make_scenario("stale", i)) for i in range(20)]
    assert any(not e.is_linear() for e in looped_trees) and any(e.is_linear() for e in looped_trees)


def test_closed_loop_prune_ends_the_branch_with_no_children():
    from detectors.exact import ExactDetector

    sc = make_scenario("stale", 0, tree_share=0.0, blip_share=0.0)
    res = simulate(sc, ExactDetector())
    assert res.stats.interventions["prune"] >= 1
    assert res.stats.ended == "pruned" and not res.stats.success
    pruned = [n for n in res.episode.tool_nodes() if n.observation is None]
    assert pruned and all(n.id not in res.episode.children for n in pruned)


def test_closed_loop_nudge_lets_an_obedient_agent_recover():
    from detectors.normalized import NormalizedDetector

    sc = make_scenario("stale", 1, tree_share=0.0, blip_share=0.0)
    sc.persona = "diligent"  # always changes course after a nudge
    res = simulate(sc, NormalizedDetector())
    assert res.stats.interventions["nudge"] == 1 and res.stats.success
    unguarded = simulate(sc, None)
    assert res.stats.wasted_calls < unguarded.stats.wasted_calls


def test_generation_does_not_depend_on_the_hash_seed():
    """Sets iterate in a per-process order; a suite must not."""
    import os
    import subprocess
    import sys

    code = ("import scenarios.families\nfrom scenarios.base import make_scenario, FAMILIES\nfrom sim.play.harness import generate\n"
            "from scenarios.trace import dumps_events, episode_events\nimport hashlib\nh = hashlib.sha256()\n"
            "for f in sorted(FAMILIES):\n    for i in range(3):\n"
            "        h.update(dumps_events(episode_events(generate(make_scenario(f, i)))))\nprint(h.hexdigest())")
    digests = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        digests.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    assert len(digests) == 1


def test_a_redrawn_scenario_leaves_its_callers_frames_to_reference_counting(monkeypatch):
    """A draw the world cannot support raises ``ScriptError`` and is redrawn. Keeping that
    exception kept its traceback, whose frames hold their callers' frames: a whole run's
    suite and results (the callers' locals) then lived on in a cycle that only a full
    collection frees, 2.8 million objects walked for 1.9 s after a default run."""
    import dataclasses
    import gc
    import weakref

    from scenarios import base
    from scenarios.families.builder import ScriptError

    redraws = []
    infos = dict(registered())
    real = infos["fresh_suggestions"].make

    def first_draw_fails(rng, params):
        if not redraws or redraws[-1] != "failed":
            redraws.append("failed")
            raise ScriptError("the world cannot support this draw")
        redraws.append("drawn")
        return real(rng, params)

    infos["fresh_suggestions"] = dataclasses.replace(infos["fresh_suggestions"], make=first_draw_fails)
    monkeypatch.setattr(base, "registered", lambda: infos)

    class Held:
        pass

    def caller():
        held = Held()  # stands for the suite a run's frame holds
        scenarios = base.make_scenarios([("fresh_suggestions", i, {}) for i in range(3)])
        assert len(scenarios) == 3
        return weakref.ref(held)

    gc.disable()
    try:
        held = caller()
        assert redraws.count("failed") == 3
        assert held() is None  # freed when the caller returned, without the collector
    finally:
        gc.enable()


# -- blips: a redundant call or two, then the agent goes back to work (SPEC §11) -----------------
BLIP_FAMILIES = sorted(n for n in loop_families() if float(FAMILIES[n].defaults.get("blip_share", 0)) > 0)


def _looping_path_flags(ep):
    [path] = [p for p in ep.paths() if any(n.label.loop for n in p if isinstance(n, ToolNode))]
    return [n.label.loop for n in path if isinstance(n, ToolNode)]


@pytest.mark.parametrize("name", BLIP_FAMILIES)
def test_a_blip_is_a_short_stuck_stretch_then_productive_work_and_the_run_succeeds(name):
    from scenarios.severity import severity
    from sim.play.harness import simulate
    from detectors.layers import StepBudgetDetector

    for i in range(4):
        sc = make_scenario(name, i, suite_seed=5, blip_share=1.0, blip_length=1, blip_after=3)
        assert sc.meta["blip"] is True
        ep = generate(sc)
        flags = _looping_path_flags(ep)
        onset = flags.index(True)
        stretch = flags[onset:].index(False)  # the stretch ends: productive calls follow
        assert not any(flags[onset + stretch:]), f"{name} #{i}: the agent went back to the loop"
        assert len(flags) - onset - stretch >= 3, f"{name} #{i}: fewer productive calls after the blip than blip_after"
        assert severity(flags, onset).to_end is False
        assert stretch == 1, f"{name} #{i}: {stretch} stuck calls, blip_length is 1"
        # Nothing nudges (a budget nobody reaches): the agent goes back to work on its own.
        assert simulate(sc, StepBudgetDetector(max_steps=10_000)).stats.success, f"{name} #{i}"


def test_runaway_loops_last_to_the_end_and_blip_share_zero_draws_no_blip():
    for i in range(6):
        sc = make_scenario("stale", i, suite_seed=5, blip_share=0.0)
        assert "blip" not in sc.meta
        flags = _looping_path_flags(generate(sc))
        assert flags[-1] is True and flags[flags.index(True):] == [True] * (len(flags) - flags.index(True))


def test_the_default_mix_has_blips_and_runaway_loops_about_half_each():
    drawn = [make_scenario("stale", i, suite_seed=11).meta["blip"] for i in range(80)]
    assert 0.3 < sum(drawn) / len(drawn) < 0.7
    assert "blip" not in make_scenario("parallel_burst", 0).meta  # one turn: no blip
    assert "blip" not in make_scenario("evasion", 0).meta  # its story is the nudge


@pytest.mark.parametrize("table, says", [
    ("[family_params.stale]\nblip_share = 1.5\n", "family_params.stale: blip_share must be a number in [0, 1], not 1.5"),
    ("[family_params.stale]\nblip_share = \"half\"\n", "blip_share must be a number in [0, 1], not 'half'"),
    ("[family_params.noisy_repeat]\ndifficulty = 2\n", "family_params.noisy_repeat: difficulty must lie in [0, 1]"),
    ("[family_params.stale]\nblip_length = 0\n", "family_params.stale: blip_length must be at least 1"),
])
def test_a_family_parameter_the_family_cannot_use_is_one_line_before_the_run(table, says, tmp_path):
    from click.testing import CliRunner
    from sim.cli import main

    suite = tmp_path / "bad.toml"
    suite.write_text('name = "bad"\nepisodes = 2\nfamilies = ["stale", "noisy_repeat"]\n' + table)
    r = CliRunner().invoke(main, ["run", "--suite", str(suite), "--detectors", "exact", "--out", str(tmp_path / "run"),
                                  "--no-progress"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"loopbench: error: {suite}: ") and says in line, r.stderr
    assert not (tmp_path / "run").exists()


def test_family_defaults_reach_every_family_with_the_parameter_below_its_own_table(tmp_path):
    from scenarios.suites import SuiteError, load_suite

    path = tmp_path / "s.toml"
    path.write_text('name = "s"\nfamilies = ["stale", "paraphrased", "healthy"]\n[family_defaults]\nblip_share = 0\n'
                    '[family_params.paraphrased]\nblip_share = 1.0\n')
    suite = load_suite(str(path))
    assert suite.family_params["stale"] == {"blip_share": 0} and suite.family_params["paraphrased"] == {"blip_share": 1.0}
    assert "healthy" not in suite.family_params  # no such parameter there
    assert "blip" not in make_scenario("stale", 0, **suite.family_params["stale"]).meta
    path.write_text('name = "s"\n[family_defaults]\nblip_shares = 0\n')
    with pytest.raises(SuiteError, match="family_defaults.blip_shares: no family has this parameter"):
        load_suite(str(path))
    path.write_text('name = "s"\n[family_default]\nblip_share = 0\n')  # a misspelt table is not ignored
    with pytest.raises(SuiteError, match=r"unknown key\(s\) family_default \(known: "):
        load_suite(str(path))
