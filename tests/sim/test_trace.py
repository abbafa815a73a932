"""The JSON Lines trace format: lossless round trips and honest errors."""
import json

from hypothesis import given

from scenarios.base import make_scenario
from tests.strategies import episodes
from sim.play.harness import generate
from scenarios.trace import episode_events, loads_trace, read_trace, write_trace
from scenarios.tree import ToolNode


def view(ep):
    """What detectors see, plus labels."""
    out = []
    for n in ep.nodes:
        if isinstance(n, ToolNode):
            o = n.observation
            out.append(("call", n.id, n.parent, n.call.tool, dict(n.call.args), n.call.step,
                        o and (o.content, o.error, o.nudge, o.recorded), n.label))
        else:
            out.append(("msg", n.id, n.parent, n.message))
    return out


@given(ep=episodes(labelled=True))
def test_round_trip_is_lossless(ep, tmp_path_factory):
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    write_trace(path, [ep])
    res = read_trace(path)
    assert res.problems == []
    assert view(res.episodes[0]) == view(ep)


def test_generated_tree_round_trips(tmp_path):
    import scenarios.families  # noqa: F401

    eps = [generate(make_scenario("branch_siblings", i)) for i in range(3)]
    write_trace(tmp_path / "t.jsonl", eps)
    back = read_trace(tmp_path / "t.jsonl").episodes
    assert [view(e) for e in back] == [view(e) for e in eps]
    assert [e.family for e in back] == ["branch_siblings"] * 3
    assert len(back[0].leaves()) == 3


def test_without_node_ids_an_episode_is_one_linear_path():
    text = "\n".join(json.dumps(r) for r in [
        {"episode": "e", "kind": "tool_call", "tool": "a", "args": {}, "call_id": "1"},
        {"episode": "e", "kind": "tool_result", "call_id": "1", "content": "x"},
        {"episode": "e", "kind": "message", "role": "assistant", "content": "hm"},
        {"episode": "e", "kind": "tool_call", "tool": "a", "args": {}, "call_id": "2"},
    ])
    res = loads_trace(text)
    ep = res.episodes[0]
    assert ep.is_linear() and len(ep.tool_nodes()) == 2 and ep.family == "replay"
    assert res.warnings and "no tool_result" in res.warnings[0]


def test_bad_records_are_reported_with_line_and_skipped():
    lines = [
        '{"episode": "e", "kind": "tool_call", "tool": "a", "args": {"q": 1}, "call_id": "1"}',
        "not json",
        '{"episode": "e", "kind": "tool_call", "tool": "a", "args": [1, 2], "call_id": "2"}',
        '{"episode": "e", "kind": "tool_call", "args": {}, "call_id": "3"}',
        '{"episode": "e", "kind": "nope"}',
        '{"episode": "e", "kind": "tool_result", "call_id": "zzz", "content": 1}',
        '{"episode": "e", "kind": "tool_call", "tool": "b", "args": {"x": NaN}, "call_id": "4"}',
        '{"episode": "e", "kind": "tool_call", "tool": "b", "args": {}, "call_id": "5"}',
    ]
    res = loads_trace("\n".join(lines), name="f.jsonl")
    assert len(res.problems) == 6
    assert res.problems[0].startswith("f.jsonl:2: not valid JSON")
    assert "f.jsonl:3: tool_call field 'args' must be an object, got an array" in res.problems
    assert "f.jsonl:4: tool_call is missing field 'tool'" in res.problems
    assert any(p.startswith("f.jsonl:7:") for p in res.problems)
    assert [n.call.call_id for n in res.episodes[0].tool_nodes()] == ["1", "5"]


def test_results_pair_by_position_when_ids_repeat():
    rows = [
        {"episode": "e", "kind": "tool_call", "tool": "a", "args": {}, "call_id": "x"},
        {"episode": "e", "kind": "tool_call", "tool": "b", "args": {}, "call_id": "x"},
        {"episode": "e", "kind": "tool_result", "call_id": "x", "content": "first"},
        {"episode": "e", "kind": "tool_result", "call_id": "x", "content": "second"},
    ]
    ep = loads_trace("\n".join(map(json.dumps, rows))).episodes[0]
    assert [n.observation.content for n in ep.tool_nodes()] == ["first", "second"]


def test_events_carry_labels_and_tree_links():
    import scenarios.families  # noqa: F401

    ep = generate(make_scenario("stale", 0))
    evs = list(episode_events(ep))
    assert evs[0]["kind"] == "episode" and evs[0]["family"] == "stale"
    calls = [e for e in evs if e["kind"] == "tool_call"]
    assert all("label" in e and "node" in e and "parent" in e for e in calls)
    assert any(e["label"]["loop"] for e in calls)
