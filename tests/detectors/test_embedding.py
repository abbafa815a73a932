"""The ``embedding`` detectors: same-path similarity, free-text vs whole-call text, overrides, cost.

Most tests use the bag-of-words ``HashingEncoder`` (word order does not matter, shared
words do), so they are fast and their numbers are exact; the two ``model`` tests load the
real bundled all-MiniLM-L6-v2.
"""
from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors import Message, Observation, ToolCall, Verdict, make_detector
from detectors import embedding as embedding_module
from detectors.embedding import CallEmbeddingDetector, EmbeddingDetector, call_text, split_free_text
from detectors.embedding_model import Embedder, HashingEncoder
from sim.play.openloop import score_episode
from scenarios.tree import Episode, ThinkNode, ToolNode


def fake_embedder() -> Embedder:
    return Embedder(encode=HashingEncoder(), model_name="fake-bow")


def det(**params) -> EmbeddingDetector:
    return EmbeddingDetector(embedder=fake_embedder(), **params)


def run(detector, calls):
    """Scores and decisions of a linear path of calls that all ran."""
    state = detector.start()
    decisions = []
    for call in calls:
        d = detector.check(state, call)
        state = detector.record(state, call, d, Observation("ok"))
        decisions.append(d)
    return decisions


def search(q, **extra):
    return ToolCall("search", {"query": q, **extra})


def test_registered_names_are_one_class_with_different_text_defaults():
    free, whole = make_detector("embedding"), make_detector("embedding_call")
    assert isinstance(whole, EmbeddingDetector) and type(free) is EmbeddingDetector
    assert free.text == "free_text" and whole.text == "call"
    # the thresholds leave-one-corpus-out supports for each (docs/detectors.md)
    assert free.threshold == 0.97 and whole.threshold == 0.85
    assert free.param_names() == CallEmbeddingDetector.param_names()
    assert {k: v for k, v in free.get_params().items() if k not in ("text", "threshold")} == {
        k: v for k, v in whole.get_params().items() if k not in ("text", "threshold")
    }


def test_embedder_is_not_a_parameter_but_survives_clone():
    d = det(threshold=0.7)
    assert "embedder" not in d.get_params()
    twin = d.clone(min_similar=2)
    assert twin.embedder is d.embedder and twin.threshold == 0.7 and twin.min_similar == 2
    assert "embedder" not in repr(twin)
    with pytest.raises(ValueError):
        d.clone(embedder=None)


def test_bad_text_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="text must be one of"):
        det(text="whole").start()
    with pytest.raises(ValueError, match="min_similar"):
        det(min_similar=0).start()


def test_paraphrase_is_nudged_with_a_message_naming_the_earlier_call():
    d1, d2, d3 = run(det(), [search("q3 revenue report"), search("weather in paris"), search("report revenue q3")])
    assert (d1.score, d2.score) == (0.0, 0.0)
    assert d3.verdict is Verdict.NUDGE and d3.score == pytest.approx(1.0)
    assert 'search(query="q3 revenue report")' in d3.message and "similarity 1.00" in d3.message
    assert d3.events[0][0] == "loop:detected" and d3.events[0][1]["count"] == 1


def test_score_is_the_similarity_and_the_threshold_sweeps_it():
    # {q3, revenue} vs {q3, revenue, europe}: cosine 2 / sqrt(2 * 3) = 0.816
    calls = [search("q3 revenue"), search("q3 revenue europe")]
    loose, strict = run(det(threshold=0.8), calls)[1], run(det(threshold=0.9), calls)[1]
    assert loose.score == strict.score == pytest.approx(2 / 6**0.5, abs=1e-6)
    assert loose.verdict is Verdict.NUDGE and strict.verdict is Verdict.ALLOW


def test_only_earlier_calls_on_the_same_path_count():
    # think -> two sibling branches with the same call; a grandchild repeats branch a's call.
    ep = Episode("tree")
    ep.add(ThinkNode("t0", None, Message("assistant", "plan")))
    ep.add(ToolNode("a", "t0", search("alpha beta gamma"), Observation("r")))
    ep.add(ToolNode("b", "t0", search("alpha beta gamma"), Observation("r")))
    ep.add(ToolNode("a2", "a", search("gamma beta alpha"), Observation("r")))
    ep.add(ToolNode("b2", "b", search("delta"), Observation("r")))
    scores = {s.node_id: (s.score, s.verdict) for s in score_episode(det(), ep)}
    assert scores["a"] == scores["b"] == (0.0, Verdict.ALLOW)
    assert scores["a2"][1] is Verdict.NUDGE
    assert scores["b2"] == (0.0, Verdict.ALLOW)


def test_min_similar_counts_similar_earlier_calls():
    calls = [search("alpha beta"), search("beta alpha"), search("alpha  beta")]
    two = run(det(min_similar=2), calls)
    assert [d.verdict for d in two] == [Verdict.ALLOW, Verdict.ALLOW, Verdict.NUDGE]
    assert two[1].score == 0.0 and two[2].score == pytest.approx(1.0)
    assert "2 earlier calls" in two[2].message
    one = run(det(), calls)
    assert [d.verdict for d in one] == [Verdict.ALLOW, Verdict.NUDGE, Verdict.NUDGE]
    # Per-tool min_similar overrides the global one.
    per_tool = run(det(tool_overrides={"search": {"min_similar": 2}}), calls)
    assert per_tool[1].verdict is Verdict.ALLOW and per_tool[2].verdict is Verdict.NUDGE


@pytest.mark.parametrize("text", ["free_text", "call"])
def test_same_tool_by_default_across_tools_on_request(text):
    calls = [ToolCall("search", {"query": "alpha beta"}), ToolCall("web_search", {"query": "alpha beta"})]
    assert run(det(text=text), calls)[1].score == 0.0
    crossed = run(det(text=text, cross_tool=True), calls)[1]
    assert crossed.score > 0.5
    if text == "free_text":
        assert crossed.verdict is Verdict.NUDGE and crossed.score == pytest.approx(1.0)


def test_per_tool_threshold_and_exempt():
    overrides = {"search": {"threshold": 0.99}, "check_status": {"exempt": True}}
    d = det(threshold=0.8, tool_overrides=overrides)
    assert d.threshold_for("search", 0.8) == 0.99
    assert d.threshold_for("fetch", 0.8) == 0.8
    assert d.threshold_for("check_status", 0.8) == float("inf")
    calls = [
        search("q3 revenue"), search("q3 revenue europe"),  # 0.816: under search's own 0.99
        ToolCall("fetch", {"query": "q3 revenue"}), ToolCall("fetch", {"query": "q3 revenue europe"}),
        ToolCall("check_status", {"job": "a b c d"}), ToolCall("check_status", {"job": "a b c d"}),
    ]
    out = run(d, calls)
    assert out[1].verdict is Verdict.ALLOW and out[1].score > 0.8
    assert out[3].verdict is Verdict.NUDGE
    assert out[5].verdict is Verdict.ALLOW and out[5].score == 0.0
    assert d.cache_lookups == 4  # exempt calls are never embedded


def test_free_text_compares_the_other_arguments_exactly():
    d = det()
    same_limit = run(d, [search("q3 revenue", limit=10), search("revenue q3", limit=10)])[1]
    other_limit = run(d, [search("q3 revenue", limit=10), search("revenue q3", limit=11)])[1]
    assert same_limit.verdict is Verdict.NUDGE
    assert other_limit.score == 0.0
    # No free text at all: equal arguments are an exact repeat, different ones never similar.
    reads = run(d, [ToolCall("read_file", {"path": "a.py"}), ToolCall("read_file", {"path": "b.py"}),
                    ToolCall("read_file", {"path": "a.py"})])
    assert [r.score for r in reads] == [0.0, 0.0, 1.0]
    # The whole-call variant embeds the path, so the fake sees "read_file path a py" vs "... b py".
    whole = run(det(text="call"), [ToolCall("read_file", {"path": "a.py"}), ToolCall("read_file", {"path": "b.py"})])
    assert whole[1].score > 0.6


def test_free_text_rule():
    keys = frozenset({"query", "q"})
    texts, skeleton = split_free_text(
        {"q": "weather", "path": "My Documents/notes on q3.txt", "note": "three words here", "n": 3,
         "filters": {"query": ["a b", "c"]}, "flag": "two words"},
        keys, 3,
    )
    assert texts == ("a b", "c", "three words here", "weather")
    assert skeleton["path"] == "My Documents/notes on q3.txt"  # a path stays exact
    assert skeleton["flag"] == "two words"  # too short for an unknown key
    assert skeleton["n"] == 3
    assert split_free_text({"query": "   "}, keys, 3) == ((), {"query": "   "})
    assert doctest.testmod(embedding_module).failed == 0


def test_cache_hit_accounting_and_prefetch():
    calls = [search("alpha beta"), search("gamma"), search("alpha beta"), search("delta"), search("gamma")]
    d = det()
    run(d, calls)
    assert (d.cache_lookups, d.model_calls, d.cache_hits) == (5, 3, 2)

    fresh = det()
    assert fresh.prefetch(calls + [ToolCall("read_file", {"path": "x"})]) == 3
    assert fresh.embedder.encode_batches == 1
    run(fresh, calls)
    assert fresh.model_calls == 3  # nothing more was encoded while scoring
    assert fresh.cache_lookups == 3 + 5 and fresh.cache_hits == 5
    # A clone shares the cache but counts its own work.
    twin = fresh.clone()
    run(twin, calls)
    assert (twin.model_calls, twin.cache_hits, twin.cache_lookups) == (0, 5, 5)


def test_disk_cache_round_trip_through_the_detector(tmp_path):
    calls = [search("alpha beta"), search("beta alpha"), search("gamma")]
    first = EmbeddingDetector(embedder=Embedder(encode=HashingEncoder(), model_name="bow", cache_dir=tmp_path))
    scores = [d.score for d in run(first, calls)]
    assert first.model_calls == 3 and scores[1] == pytest.approx(1.0)
    second = EmbeddingDetector(embedder=Embedder(encode=HashingEncoder(), model_name="bow", cache_dir=tmp_path))
    assert [d.score for d in run(second, calls)] == scores
    assert (second.model_calls, second.cache_hits) == (0, 3)


def test_parent_state_is_never_mutated():
    d = det()
    obs = Observation("ok")
    root = d.start()
    a = search("alpha beta")
    parent = d.record(root, a, d.check(root, a), obs)
    left_call, right_call = search("gamma delta"), search("epsilon zeta")
    left = d.record(parent, left_call, d.check(parent, left_call), obs)
    right = d.record(parent, right_call, d.check(parent, right_call), obs)
    assert (root.n, parent.n, left.n, right.n) == (0, 1, 2, 2)
    assert parent.labels() == ['search(query="alpha beta")']
    assert left.labels()[1] == 'search(query="gamma delta")'
    assert right.labels()[1] == 'search(query="epsilon zeta")'
    # Each branch sees only its own call; the parent sees neither.
    assert d.check(right, left_call).score == 0.0
    assert d.check(left, left_call).verdict is Verdict.NUDGE
    assert d.check(parent, left_call).score == 0.0
    # A nudged or pruned call did not run and does not extend the path.
    assert d.record(parent, a, d.check(parent, a), Observation("nudge", nudge=True)) is parent
    assert d.record(parent, a, d.check(parent, a), None) is parent


def test_long_paths_grow_their_storage():
    calls = [search(f"topic{i} words here") for i in range(40)] + [search("words here topic3")]
    out = run(det(), calls)
    assert all(x.verdict is Verdict.ALLOW for x in out[:40])
    assert out[40].verdict is Verdict.NUDGE and "topic3" in out[40].message


def test_odd_arguments_do_not_break_it():
    calls = [ToolCall("t", {1: "a b c", "x": float("nan"), "y": {"z": [b"bytes", {3, 4}]}}),
             ToolCall("t", "not a mapping"), ToolCall("t", {"deep": [[[["q r s"]]]]})]
    for text in ("free_text", "call"):
        assert all(0.0 <= x.score <= 1.0 for x in run(det(text=text), calls))


# -- the real model (loaded once for both tests) -----------------------------------------------


@pytest.mark.model
def test_real_model_scores_a_paraphrased_repeat_above_a_distinct_call():
    d = make_detector("embedding")
    history = [search("q3 revenue")]
    state = d.start()
    for call in history:
        state = d.record(state, call, d.check(state, call), Observation("Q3 revenue was $4.2M"))
    distinct = d.check(state, search("weather in Paris")).score
    reworded = search("revenue for Q3")
    first = d.check(state, reworded)
    state = d.record(state, reworded, first, Observation("Q3 revenue was $4.2M"))
    second = d.check(state, search("third-quarter revenue figures")).score
    assert first.score > 0.9 and first.verdict is Verdict.NUDGE
    assert second > distinct + 0.3
    assert distinct < 0.2


@pytest.mark.model
def test_real_model_reads_of_different_files_free_text_vs_whole_call():
    a, b = ToolCall("read_file", {"path": "a.py"}), ToolCall("read_file", {"path": "b.py"})
    free = run(make_detector("embedding"), [a, b])[1]
    whole = run(make_detector("embedding_call"), [a, b])[1]
    assert free.verdict is Verdict.ALLOW and free.score == 0.0
    assert whole.score >= 0.85 and whole.verdict is Verdict.NUDGE


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=30), st.sampled_from(["a b", "c d", "e f", "a c"])), max_size=40))
def test_every_state_keeps_its_own_path_whatever_the_branching(ops):
    """Extend random earlier states (siblings, grandchildren, re-extensions): no state's view changes."""
    d = det()
    states = [(d.start(), [])]
    for parent_index, query in ops:
        parent, path = states[parent_index % len(states)]
        call = search(query)
        child = d.record(parent, call, d.check(parent, call), Observation("ok"))
        states.append((child, path + [call_text(call)]))
        for state, expected in states:
            assert state.labels() == expected
    for state, expected in states:  # a repeat scores 1.0 exactly when its text is already on the path
        probe = search("a b")
        assert (d.check(state, probe).score == pytest.approx(1.0)) == ('search(query="a b")' in expected)
