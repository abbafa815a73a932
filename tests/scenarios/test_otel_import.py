"""`import --format otel`: OTLP JSON written by the real OpenTelemetry SDK, both naming generations."""
from __future__ import annotations

import json

import pytest

from scenarios.importers import FORMATS, import_file
from scenarios.trace import read_trace, write_trace

from .otel_writer import Agent, Chat, Tool, write_otlp


def _agent_run() -> Agent:
    """A root agent: search, search again (same args), a failing fetch, two parallel lookups,
    then a sub-agent with its own call, then a final answer."""
    return Agent("main", 0, 100, [
        Tool("search", {"q": "paris"}, 1, 5, result={"hits": ["Paris"]}, call_id="c1"),
        Tool("search", {"q": "paris"}, 6, 9, result={"hits": ["Paris"]}, call_id="c2"),
        Tool("fetch", {"url": "http://x"}, 10, 12, error="HTTP 500", call_id="c3"),
        Tool("lookup", {"id": 1}, 13, 20, result="one", call_id="c4"),
        Tool("lookup", {"id": 2}, 14, 19, result="two", call_id="c5"),
        Agent("helper", 21, 40, [Tool("calc", "2+2", 22, 23, result="4", call_id="c6")]),
        Tool("answer", {"text": "done"}, 41, 42, result="ok", call_id="c7"),
    ])


def _calls(ep):
    return [(n.call.tool, n.call.args) for n in ep.tool_nodes()]


def test_registered():
    assert "otel" in FORMATS


def test_current_naming_with_results(tmp_path):
    path = write_otlp(tmp_path / "t.jsonl", [_agent_run()])
    eps, problems = import_file("otel", path)
    assert problems == []
    assert len(eps) == 1
    ep = eps[0]
    assert len(ep.id) == 32 and ep.meta["source_format"] == "otel" and ep.meta["root_span"] == "invoke_agent main"
    assert _calls(ep) == [
        ("search", {"q": "paris"}), ("search", {"q": "paris"}), ("fetch", {"url": "http://x"}),
        ("lookup", {"id": 1}), ("lookup", {"id": 2}), ("calc", {"_raw": "2+2"}), ("answer", {"text": "done"}),
    ]
    nodes = ep.tool_nodes()
    assert [n.call.call_id for n in nodes] == ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]
    # JSON results kept as the text the tool returned; plain strings as they are.
    assert json.loads(nodes[0].observation.content) == {"hits": ["Paris"]}
    assert nodes[3].observation.content == "one"
    # Errors from the span status: no result attribute, so the status message is the content.
    assert nodes[2].observation.error is True and nodes[2].observation.content == "HTTP 500"
    assert not nodes[0].observation.error
    # Tree: a chain, the overlapping lookups are sibling branches, the sub-agent branches off.
    by = {n.call.call_id: n for n in nodes}
    assert by["c1"].parent is None
    assert by["c2"].parent == by["c1"].id and by["c3"].parent == by["c2"].id
    assert by["c4"].parent == by["c3"].id and by["c5"].parent == by["c3"].id  # parallel
    assert by["c6"].parent == by["c5"].id  # sub-agent hangs off the last call started before it
    assert by["c7"].parent == by["c5"].id  # and the main agent goes on from there too
    assert not ep.is_linear()
    assert len(list(ep.paths())) == 3


def test_round_trip_through_trace_format(tmp_path):
    path = write_otlp(tmp_path / "t.jsonl", [_agent_run()])
    eps, _ = import_file("otel", path)
    write_trace(tmp_path / "out.jsonl", eps)
    back = read_trace(tmp_path / "out.jsonl")
    assert back.problems == []
    assert _calls(back.episodes[0]) == _calls(eps[0])
    assert [n.parent for n in back.episodes[0].tool_nodes()] == [n.parent for n in eps[0].tool_nodes()]


def test_current_naming_without_results(tmp_path):
    path = write_otlp(tmp_path / "t.jsonl", [_agent_run()], results=False)
    eps, problems = import_file("otel", path)
    assert problems == []
    nodes = eps[0].tool_nodes()
    assert len(nodes) == 7
    # Every execute_tool span ran: without a recorded result it is imported as unrecorded, not as a call
    # that never ran (None), so detectors still see it.
    assert all(n.observation is not None for n in nodes)
    assert [n.observation.recorded for n in nodes] == [False, False, True, False, False, False, False]
    assert nodes[2].observation.error  # a failed call still carries its error


def test_an_exact_repeat_of_a_result_less_call_is_caught_by_exact(tmp_path):
    from detectors.registry import make_detector
    from sim.play.openloop import score_episode

    run = Agent("main", 0, 100, [Tool("get_order", {"order": "O-7"}, 1 + 10 * i, 5 + 10 * i, result="delayed",
                                      call_id=f"c{i}") for i in range(3)])
    path = write_otlp(tmp_path / "t.jsonl", [run], results=False)
    eps, problems = import_file("otel", path)
    assert problems == [] and all(not n.observation.recorded for n in eps[0].tool_nodes())
    scores = score_episode(make_detector("exact"), eps[0])
    assert [s.verdict.value for s in scores][:2] == ["allow", "prune"]


def test_agent_as_tool_children_branch_from_the_tool(tmp_path):
    run = Agent("main", 0, 50, [
        Tool("delegate", {"task": "t"}, 1, 20, result="sub done", call_id="d1",
             children=[Agent("sub", 2, 19, [Tool("read", {"f": "a"}, 3, 4, result="A", call_id="r1"),
                                             Tool("read", {"f": "b"}, 5, 6, result="B", call_id="r2")])]),
        Tool("write", {"f": "c"}, 21, 22, result="ok", call_id="w1"),
    ])
    eps, _ = import_file("otel", write_otlp(tmp_path / "t.jsonl", [run]))
    by = {n.call.call_id: n for n in eps[0].tool_nodes()}
    assert [n.call.call_id for n in eps[0].tool_nodes()] == ["d1", "r1", "r2", "w1"]
    assert by["r1"].parent == by["d1"].id and by["r2"].parent == by["r1"].id
    assert by["w1"].parent == by["d1"].id


def _old_run() -> Agent:
    return Agent("main", 0, 60, [
        Chat(1, 2, tool_calls=[("call_a", "get_weather", {"city": "Oslo"})]),
        Tool("get_weather", None, 3, 4, result="rain", call_id="call_a"),
        Chat(5, 6, tool_calls=[("call_b", "get_weather", {"city": "Oslo"})], tool_results=[("call_a", "rain")]),
        Tool("get_weather", None, 7, 8, result="rain", error=None, call_id="call_b"),
        Chat(9, 10, tool_calls=[("call_c", "book", {"day": 1})], tool_results=[("call_b", "rain")]),
        Tool("book", None, 11, 12, error="sold out", call_id="call_c"),
        Chat(13, 14, tool_results=[("call_c", "sold out")]),
    ])


def test_v136_naming_with_results(tmp_path):
    eps, problems = import_file("otel", write_otlp(tmp_path / "old.jsonl", [_old_run()], generation="v1.36"))
    assert problems == []
    nodes = eps[0].tool_nodes()
    assert _calls(eps[0]) == [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Oslo"}), ("book", {"day": 1})]
    assert [n.observation.content for n in nodes] == ["rain", "rain", "sold out"]
    assert [n.observation.error for n in nodes] == [False, False, True]
    assert eps[0].is_linear()


def test_v136_naming_without_results(tmp_path):
    eps, problems = import_file("otel", write_otlp(tmp_path / "old.jsonl", [_old_run()], generation="v1.36", results=False))
    assert problems == []
    nodes = eps[0].tool_nodes()
    assert len(nodes) == 3 and nodes[0].call.args == {"city": "Oslo"}
    assert not nodes[0].observation.recorded and not nodes[1].observation.recorded  # ran, result not kept
    assert nodes[2].observation.error  # status still says it failed


def test_traces_grouped_by_trace_id_in_order(tmp_path):
    runs = [Agent("a", 0, 10, [Tool("x", {"i": 1}, 1, 2, result="1")]),
            Agent("b", 20, 30, [Tool("y", {"i": 2}, 21, 22, result="2")])]
    eps, _ = import_file("otel", write_otlp(tmp_path / "t.jsonl", runs))
    assert [_calls(e) for e in eps] == [[("x", {"i": 1})], [("y", {"i": 2})]]
    assert eps[0].id != eps[1].id


def test_broken_lines_reported_good_traces_kept(tmp_path):
    path = write_otlp(tmp_path / "t.jsonl", [_agent_run()])
    good = path.read_text().splitlines()
    doc = json.loads(good[0])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0].pop("traceId")
    lines = ["{not json", json.dumps({"hello": 1}), json.dumps(doc)] + good[1:]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    eps, problems = import_file("otel", tmp_path / "bad.jsonl")
    assert len(eps) == 1 and len(eps[0].tool_nodes()) == 6  # the span without trace id is gone
    assert any(p.startswith(f"{tmp_path / 'bad.jsonl'}:1: not valid JSON") for p in problems)
    assert any(":2: no 'resourceSpans'" in p for p in problems)
    assert any(":3: span has no 'traceId', span skipped" in p for p in problems)
    assert all("\n" not in p for p in problems)


def test_protobuf_file_gets_one_clear_line(tmp_path):
    # An ExportTraceServiceRequest starts with field 1 (resource_spans), wire type 2.
    (tmp_path / "t.otlp").write_bytes(b"\n\x8c\x01\n\x1e\n\x0cservice.name\x12\x0e\n\x0cagent\x12\x05span")
    eps, problems = import_file("otel", tmp_path / "t.otlp")
    assert eps == [] and len(problems) == 1
    assert "OTLP protobuf" in problems[0] and "OTLP JSON" in problems[0]


def test_no_tool_spans_gets_one_clear_line(tmp_path):
    run = Agent("main", 0, 10, [Chat(1, 2)])
    eps, problems = import_file("otel", write_otlp(tmp_path / "t.jsonl", [run]))
    assert eps == [] and len(problems) == 1
    assert "no tool spans" in problems[0] and "execute_tool" in problems[0]


def test_trace_without_tools_skipped_others_kept(tmp_path):
    runs = [Agent("a", 0, 10, [Chat(1, 2)]), Agent("b", 20, 30, [Tool("y", {"i": 2}, 21, 22, result="2")])]
    eps, problems = import_file("otel", write_otlp(tmp_path / "t.jsonl", runs))
    assert len(eps) == 1 and len(problems) == 1 and "no tool spans" in problems[0]


def test_single_document_and_openinference_names(tmp_path):
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [
        {"traceId": "ab" * 16, "spanId": "01" * 8, "name": "lookup", "startTimeUnixNano": "5", "endTimeUnixNano": "6",
         "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "TOOL"}},
                        {"key": "tool.name", "value": {"stringValue": "lookup"}},
                        {"key": "input.value", "value": {"stringValue": "{\"k\": 3}"}},
                        {"key": "output.value", "value": {"stringValue": "three"}}],
         "status": {"code": "STATUS_CODE_OK"}}]}]}]}
    (tmp_path / "one.json").write_text(json.dumps(doc, indent=2))
    eps, problems = import_file("otel", tmp_path / "one.json")
    assert problems == []
    assert _calls(eps[0]) == [("lookup", {"k": 3})] and eps[0].tool_nodes()[0].observation.content == "three"


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_empty_file(tmp_path, content):
    (tmp_path / "e.jsonl").write_text(content)
    eps, problems = import_file("otel", tmp_path / "e.jsonl")
    assert eps == [] and len(problems) == 1 and "no tool spans" in problems[0]
