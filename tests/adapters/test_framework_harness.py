"""The quick suite's scripted agents played through pydantic-ai's real agent loop (the persona as
its FunctionModel, the world's tools as its tools, the guard through the adapter) give the
closed-loop outcome the built-in harness gives, scenario by scenario."""
from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai")

from detectors.registry import make_detector  # noqa: E402
from scenarios.suites import load_suite  # noqa: E402
from sim.execute.runner import build_scenarios  # noqa: E402
from sim.play.frameworks import Unsupported, play_pydantic_ai  # noqa: E402
from sim.play.harness import simulate  # noqa: E402


def outcome(stats):
    return (stats.ended, stats.success, stats.executed, stats.wasted_calls, round(stats.spend, 9),
            dict(stats.interventions), stats.false_interventions)


@pytest.mark.parametrize("detector", ["progress_guard", "exact"])
def test_linear_quick_suite_scenarios_end_as_in_the_built_in_harness(detector):
    suite = load_suite("quick")
    scenarios = build_scenarios(suite.families, 3, suite.seed, suite.family_params, suite.family_weights)
    played = skipped = differs = 0
    for sc in scenarios:
        try:
            framework = play_pydantic_ai(sc, make_detector(detector))
        except Unsupported:
            skipped += 1
            continue
        builtin = simulate(sc, make_detector(detector)).stats
        if builtin.ended == "pruned":
            # The documented difference: a framework's run has no branch to drop, so a pruned
            # call is answered with "call not run" and the run goes on; the built-in harness
            # ends the path there.
            assert framework.ended != "pruned" and framework.interventions["prune"] >= 1, sc.id
            differs += 1
        else:
            assert outcome(framework) == outcome(builtin), sc.id
        played += 1
    assert played > 2 * skipped  # most scenarios are linear; branching ones are refused, not faked
    assert played >= 30
    if detector == "progress_guard":
        assert differs == 0  # it nudges and stops, never prunes: every linear play is identical
