"""The label validator over the suites: every generated episode re-labelled from the
world, onsets at the first redundant call, loop kinds equal to the family's."""
import os

import pytest

from scenarios.base import Scenario, healthy_families, loop_families, make_scenario
from scenarios.suites import load_suite
from sim.play.harness import LabelError, generate
from scenarios.tree import Label
from sim.play.validate import validate_episode, validate_suite

WORKERS = min(2, os.cpu_count() or 1)


def _validate(name: str, sample: int | None = None):
    suite = load_suite(name)
    idx = range(0, suite.episodes, sample) if sample else None
    checked = validate_suite(suite.families, suite.episodes, suite.seed, suite.family_params, workers=WORKERS, indices=idx,
                             weights=suite.family_weights)
    assert {c.family for c in checked} == set(suite.families) == set(loop_families()) | set(healthy_families())
    for c in checked:
        assert (c.looping_paths > 0) == (c.family in loop_families())
    return checked


def test_default_suite_validates():
    from scenarios.suites import episode_count

    suite = load_suite("default")
    assert len(_validate("default")) == sum(episode_count(40, suite.family_weights.get(f, 1.0)) for f in suite.families)


def test_full_suite_sample_validates():
    """Every 10th episode of the full suite (the whole of it is the slow test below)."""
    assert len(_validate("full", sample=10)) == 200 * len(loop_families() + healthy_families())


@pytest.mark.slow
def test_full_suite_validates():
    assert len(_validate("full")) == 2000 * len(loop_families() + healthy_families())


def test_validator_catches_a_wrong_label_and_a_wrong_kind():
    sc = make_scenario("stale", 0, tree_share=0.0)
    ep = generate(sc)
    validate_episode(sc, ep)
    first_loop = next(n for n in ep.tool_nodes() if n.label.loop)
    first_loop.label = Label(True, "cycle")
    with pytest.raises(LabelError, match="expected 'stale'"):
        validate_episode(sc, ep)
    first_loop.label = Label(False, None)
    with pytest.raises(LabelError, match="gains nothing"):
        validate_episode(sc, ep)


def test_validator_catches_a_healthy_episode_that_loops():
    sc = make_scenario("stale", 1, tree_share=0.0)
    ep = generate(sc)
    fake = Scenario(sc.id, "healthy", sc.seed, sc.world, sc.script)
    with pytest.raises(LabelError, match="healthy family's episode has 1 looping path"):
        validate_episode(fake, ep)
