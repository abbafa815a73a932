"""Property tests on realistic, arbitrary scenarios drawn by ``scenario_episodes()``."""
import math

from hypothesis import given, settings

from detectors.registry import make_detector
from tests.strategies import scenario_episodes
from sim.play.openloop import score_episode
from sim.scoring.outcomes import DELTA, alarms_from, composite, episode_outcomes, load_profiles
from sim.play.validate import validate_episode

SEED_DETECTORS = ("exact", "normalized", "planner", "step_budget", "no_progress", "layered")
_, PROFILES = load_profiles()


@settings(max_examples=25, deadline=None)
@given(scenario_episodes(with_scenario=True))
def test_drawn_scenarios_are_valid_and_seed_detectors_score_them_consistently(drawn):
    sc, ep = drawn
    validate_episode(sc, ep)
    n_calls = len(ep.tool_nodes())
    for name in SEED_DETECTORS:
        scores = score_episode(make_detector(name), ep)
        assert len(scores) == n_calls
        assert all(math.isfinite(s.score) for s in scores)
        outs = episode_outcomes(ep, alarms_from(scores))
        for o in outs:
            assert o.outcome in ("tn", "fp", "early", "tp", "miss")
            if o.outcome == "tp":
                assert o.delay == o.first_alarm - o.onset and 0 <= o.delay <= DELTA
            if o.outcome == "early":
                assert o.first_alarm < o.onset
            if o.outcome in ("tn", "fp"):
                assert len(outs) == 1
        for w in PROFILES.values():
            assert math.isfinite(composite(outs, w))
        # A detector that never fires scores no TP, no FP and no EARLY.
        silent = episode_outcomes(ep, {})
        assert {o.outcome for o in silent} <= {"tn", "miss"}
