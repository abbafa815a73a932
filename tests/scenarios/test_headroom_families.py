"""The headroom families (scenarios/families/headroom.py) and the browser they use (scenarios/webtools.py).

Beyond the generic checks every family gets in test_families.py: labels validate at both
ends of ``difficulty`` on linear paths and trees, generation is deterministic, and the
difficulty parameter changes what each family's docstring says it changes.
"""
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scenarios.families  # noqa: F401
from detectors.protocol import ToolCall
from scenarios.base import FAMILIES, make_scenario
from scenarios.families.headroom import level
from scenarios.trace import dumps_events, episode_events
from scenarios.webtools import canonical_url
from scenarios.world import World, WorldState
from sim.play.harness import generate
from sim.play.validate import scored_looping_paths, validate_episode

LOOPS = ("failed_write_reread", "web_revisit", "redelegate_same_page", "noisy_repeat", "late_loop", "paraphrase_far",
         "drift_multi", "cycle_reworded", "paging_overrun")
HEALTHY = ("numbered_paging", "edit_retest_mixed")
ALL = LOOPS + HEALTHY
BANNER = re.compile(r"\[(Accept all|Sign up|Sign in|OK)\]|^Sponsored:", re.M)


def episode(name, i, **params):
    """Runaway loops unless asked (their shape is what these tests check; blips: test_families)."""
    if FAMILIES[name].looping:
        params.setdefault("blip_share", 0.0)
    sc = make_scenario(name, i, suite_seed=5, **params)
    return sc, generate(sc)


def test_registered_in_their_class_with_a_difficulty_parameter():
    for name in ALL:
        info = FAMILIES[name]
        assert info.looping == (name in LOOPS)
        assert info.defaults["difficulty"] == (0.0, 1.0)
        assert "Real class" in (info.make.__doc__ or ""), f"{name}: the docstring names the real-trace class"


@pytest.mark.parametrize("name", ALL)
def test_labels_validate_at_both_ends_of_difficulty_on_paths_and_trees(name):
    shapes = set()
    for difficulty in (0.0, 1.0):
        for tree_share in (0.0, 1.0):
            for i in range(3):
                sc, ep = episode(name, i, difficulty=difficulty, tree_share=tree_share)
                checked = validate_episode(sc, ep)  # raises LabelError on any disagreement with the world
                assert (checked.looping_paths > 0) == (name in LOOPS)
                shapes.add(ep.is_linear())
    assert True in shapes
    if FAMILIES[name].defaults.get("tree_share", 0) or name in HEALTHY:
        assert False in shapes, "tree_share = 1 gives trees"


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(ALL), index=st.integers(0, 10_000), difficulty=st.floats(0.0, 1.0))
def test_any_seed_and_difficulty_gives_valid_labels(name, index, difficulty):
    sc, ep = episode(name, index, difficulty=difficulty)
    validate_episode(sc, ep)
    assert bool(scored_looping_paths(ep)) == (name in LOOPS)


@pytest.mark.parametrize("name", ALL)
def test_deterministic_per_seed_and_difficulty(name):
    a = dumps_events(episode_events(episode(name, 4, difficulty=0.6)[1]))
    b = dumps_events(episode_events(episode(name, 4, difficulty=0.6)[1]))
    c = dumps_events(episode_events(episode(name, 4, difficulty=0.1)[1]))
    assert a == b and a != c


def test_difficulty_outside_0_1_is_refused():
    import random

    assert level(random.Random(0), {"difficulty": 0.25}) == 0.25
    assert 0.2 <= level(random.Random(0), {"difficulty": (0.2, 0.4)}) <= 0.4
    for bad in (1.5, -0.1, (0.6, 0.2)):
        with pytest.raises(ValueError, match="difficulty must lie in"):
            level(random.Random(0), {"difficulty": bad})


def _loop_calls(ep):
    return [n for n in ep.tool_nodes() if n.label.loop]


def _mean(xs):
    return sum(xs) / len(xs)


def test_difficulty_raises_the_ui_noise_of_pages():
    def noise(d):
        hits = 0
        for i in range(8):
            _, ep = episode("web_revisit", i, difficulty=d, tree_share=0.0)
            hits += sum(len(BANNER.findall(n.observation.content)) for n in _loop_calls(ep))
        return hits

    assert noise(0.0) == 0 and noise(1.0) > 20


def test_difficulty_respells_addresses_and_rewords_redelegations():
    def spellings(d):
        out = set()
        for i in range(8):
            _, ep = episode("redelegate_same_page", i, difficulty=d, tree_share=0.0)
            out |= {n.call.args["url"] for n in _loop_calls(ep) if n.call.tool == "visit_url"}
        return out

    plain = spellings(0.0)
    assert all(u.startswith("https://") and "?" not in u and "#" not in u for u in plain)
    assert any("?" in u or "#" in u or not u.startswith("https://") for u in spellings(1.0))


def test_failed_write_reread_varies_the_refused_write_only_when_hard():
    def distinct_values(d):
        out = []
        for i in range(8):
            _, ep = episode("failed_write_reread", i, difficulty=d, tree_share=0.0, loop_length=8)
            writes = [n for n in _loop_calls(ep) if n.call.tool == "update_record"]
            assert writes and all(n.observation.error for n in writes), "every write in the loop is refused"
            reads = [n for n in _loop_calls(ep) if n.call.tool == "get_record"]
            assert len({n.observation.content for n in reads}) == 1, "the read brings the identical record"
            out.append(len({repr(n.call.args["value"]) for n in writes}))
        return out

    assert set(distinct_values(0.0)) == {1}
    assert max(distinct_values(1.0)) >= 3


def test_paraphrase_far_lowers_the_overlap_between_wordings():
    def overlap(d):
        return _mean([make_scenario("paraphrase_far", i, suite_seed=5, difficulty=d, tree_share=0.0).meta["mean_jaccard"]
                      for i in range(10)])

    assert overlap(1.0) < overlap(0.0) - 0.15


def test_late_loop_starts_later_when_harder():
    def onset(d):
        out = []
        for i in range(5):
            _, ep = episode("late_loop", i, difficulty=d)
            calls = ep.tool_nodes()
            out.append(next(k for k, n in enumerate(calls) if n.label.loop))
        return out

    easy, hard = onset(0.0), onset(1.0)
    assert max(easy) < min(hard) and min(hard) >= 90
    # the stretch holds identical calls that gained (polls, scrolls): not loops
    _, ep = episode("late_loop", 0, difficulty=1.0)
    calls = [n for n in ep.tool_nodes() if not n.label.loop]
    keys = [n.call.tool + repr(sorted(n.call.args.items())) for n in calls]
    assert len(set(keys)) < len(keys)


def test_drift_multi_moves_more_arguments_when_harder():
    def moved(d):
        out = []
        for i in range(10):
            _, ep = episode("drift_multi", i, difficulty=d, tree_share=0.0)
            loop = _loop_calls(ep)
            for a, b in zip(loop, loop[1:]):
                x = {**a.call.args, **a.call.args.get("params", {})}
                y = {**b.call.args, **b.call.args.get("params", {})}
                out.append(sum(1 for k in set(x) | set(y) if k != "params" and x.get(k) != y.get(k)))
        return _mean(out)

    assert moved(1.0) > moved(0.0) + 0.8


def test_cycle_reworded_lengthens_and_rewords_the_cycle():
    easy = [make_scenario("cycle_reworded", i, suite_seed=5, difficulty=0.0) for i in range(4)]
    hard = [make_scenario("cycle_reworded", i, suite_seed=5, difficulty=1.0) for i in range(4)]
    assert {s.meta["cycle"] for s in easy} == {3} and {s.meta["cycle"] for s in hard} == {6}
    _, ep = episode("cycle_reworded", 0, difficulty=0.0, tree_share=0.0)
    loop = _loop_calls(ep)
    assert all((loop[i].call.tool, loop[i].call.args) == (loop[i + 3].call.tool, loop[i + 3].call.args) for i in range(len(loop) - 3)), "at 0 the cycle repeats exactly"


@pytest.mark.parametrize("name", ("numbered_paging", "paging_overrun"))
def test_paging_uses_smaller_pages_when_harder(name):
    for d, size in ((0.0, 3), (1.0, 1)):
        _, ep = episode(name, 1, difficulty=d, tree_share=0.0)
        pages = [n for n in ep.tool_nodes() if n.call.tool == "search" and "page" in n.call.args]
        assert pages and {n.call.args["limit"] for n in pages} == {size}
        productive = [n for n in pages if not n.label.loop]
        # every productive page brings results not seen on an earlier page
        seen = set()
        for n in productive:
            ids = set(re.findall(r"\[(D\d+)\]", n.observation.content))
            assert not ids or ids - seen
            seen |= ids


def test_edit_retest_mixed_edits_through_bash_when_harder():
    def bash_edits(d):
        return sum(make_scenario("edit_retest_mixed", i, suite_seed=5, difficulty=d).meta["bash_edits"] for i in range(6))

    assert bash_edits(0.0) == 0 and bash_edits(1.0) > 10
    for i in range(6):
        _, ep = episode("edit_retest_mixed", i, difficulty=1.0, tree_share=0.0)
        tests = [n for n in ep.tool_nodes() if n.call.tool == "run_tests" or "pytest" in str(n.call.args.get("command", ""))]
        assert len(tests) >= 3 and not any(n.label.loop for n in tests)


# -- the browser -------------------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["https://www.example.org/revenue", "http://example.org/revenue/",
                                      "example.org/revenue#top", "www.example.org/revenue?utm_source=x&ref=nav"])
def test_spellings_of_an_address_name_one_page(spelling):
    assert canonical_url(spelling) == "example.org/revenue"
    assert canonical_url("example.org/revenue?page=2") != "example.org/revenue"


def test_ui_noise_changes_the_text_never_the_facts():
    world = World.build(7)
    world.ui_noise = 1.0
    ws = WorldState()
    texts, facts = set(), set()
    for i in range(6):
        res = world.execute(ws, ToolCall("visit_url", {"url": "https://docs.example.com/cache"}))
        ws = res.state
        texts.add(res.observation.content)
        facts.add(res.facts)
    assert len(texts) == 6 and facts == {frozenset({"web:docs.example.com/cache"})}


def test_websurfer_brings_the_same_page_for_a_reworded_request():
    world = World.build(3)
    ws = WorldState()
    first = world.execute(ws, ToolCall("WebSurfer", {"instruction": "Please find the q3 revenue page"}))
    again = world.execute(first.state, ToolCall("WebSurfer", {"instruction": "Go to the third quarter sales figures"}))
    assert first.facts == again.facts and first.observation.content != again.observation.content
    unclear = world.execute(ws, ToolCall("WebSurfer", {"instruction": "please do it"}))
    assert unclear.observation.error


def test_click_follows_the_open_pages_links_only():
    world = World.build(3)
    ws = world.execute(WorldState(), ToolCall("visit_url", {"url": "example.org/revenue"})).state
    home = world.execute(ws, ToolCall("click", {"target": "home"}))
    assert home.facts == {"web:example.org/"}
    missing = world.execute(ws, ToolCall("click", {"target": "Nowhere"}))
    assert missing.observation.error and missing.state.browser == ws.browser


@pytest.mark.parametrize("name", [n for n in LOOPS if n != "late_loop"])
def test_prefix_sets_where_the_loop_starts(name):
    def onset(prefix):
        out = []
        for i in range(4):
            _, ep = episode(name, i, prefix=prefix, tree_share=0.0)
            out.append(next(k for k, n in enumerate(ep.tool_nodes()) if n.label.loop))
        return _mean(out)

    assert onset(10) >= onset(0) + 8
