"""A call that ran without a recorded result (issue 17): the trace format, replay, closed loop."""
import json

import pytest

from detectors.embedding_model import Embedder, HashingEncoder
from detectors.exact import ExactDetector
from detectors.layers import NoProgressDetector
from detectors.progress_guard import ProgressGuard
from detectors.protocol import UNRECORDED, Detector, Observation, ToolCall, allow, unrecorded
from scenarios.base import make_scenario
from scenarios.trace import episode_events, loads_trace, write_trace, read_trace
from scenarios.tree import Episode, ThinkNode, ToolNode, linear_episode
from sim.play.harness import simulate
from sim.play.openloop import score_episode


def rec(**fields):
    return json.dumps({"episode": "e", **fields})


def verdicts(detector, ep):
    return [s.verdict.value for s in score_episode(detector, ep)]


# -- the format --------------------------------------------------------------------------
def test_unrecorded_results_round_trip_and_stay_distinct_from_calls_that_never_ran(tmp_path):
    ep = Episode("e")
    ep.add(ToolNode("a", None, ToolCall("search", {"q": "x"}, "a"), Observation("3 hits")))
    ep.add(ToolNode("b", "a", ToolCall("search", {"q": "x"}, "b"), UNRECORDED))
    ep.add(ToolNode("c", "b", ToolCall("http_get", {"url": "u"}, "c"), unrecorded(error=True)))
    ep.add(ToolNode("d", "c", ToolCall("search", {"q": "x"}, "d"), None))  # pruned: never ran
    ep.add(ToolNode("f", "c", ToolCall("calc", {"e": "1"}, "f"), Observation("Loop guard: stop", nudge=True)))
    lines = [e for e in episode_events(ep) if e["kind"] == "tool_result"]
    assert [e["call_id"] for e in lines] == ["a", "b", "c", "f"]  # the pruned call has no result line
    assert lines[1] == {"episode": "e", "kind": "tool_result", "call_id": "b", "recorded": False, "error": False}
    assert lines[2]["recorded"] is False and lines[2]["error"] is True and "content" not in lines[2]
    assert "recorded" not in lines[0] and lines[0]["content"] == "3 hits"  # recorded results are written as before
    write_trace(tmp_path / "t.jsonl", [ep])
    res = read_trace(tmp_path / "t.jsonl")
    assert res.problems == []
    back = {n.id: n.observation for n in res.episodes[0].tool_nodes()}
    assert back == {n.id: n.observation for n in ep.tool_nodes()}
    assert back["b"] is UNRECORDED and back["c"] == Observation(None, error=True, recorded=False)
    assert back["d"] is None
    # Only the call that never ran is reported as missing its result.
    assert len(res.warnings) == 1 and "tool_call 'd' has no tool_result" in res.warnings[0]
    assert "never ran" in res.warnings[0]


@pytest.mark.parametrize("result,problem", [
    ({"recorded": False, "content": "x"}, "with \"recorded\": false must not carry 'content'"),
    ({"recorded": "no"}, "field 'recorded' must be a boolean"),
    ({"recorded": False, "nudge": True}, "cannot be a nudge"),
    ({}, "missing field 'content'"),
    ({"recorded": True}, "missing field 'content'"),
])
def test_bad_unrecorded_results_are_one_line_problems(result, problem):
    text = "\n".join([rec(kind="tool_call", tool="a", args={}, call_id="1"),
                      rec(kind="tool_result", call_id="1", **result),
                      rec(kind="tool_call", tool="a", args={}, call_id="2"),
                      rec(kind="tool_result", call_id="2", recorded=False)])
    res = loads_trace(text, name="t.jsonl")
    assert len(res.problems) == 1 and res.problems[0].startswith("t.jsonl:2: ") and problem in res.problems[0]
    first, second = res.episodes[0].tool_nodes()
    assert first.observation is None  # the bad result was skipped; the rest is still read
    assert second.observation is UNRECORDED


# -- open-loop replay --------------------------------------------------------------------
def _trace_of_repeats(with_results: bool) -> str:
    lines = []
    for i in range(4):
        lines.append(rec(kind="tool_call", tool="search", args={"query": "q3 revenue"}, call_id=f"c{i}"))
        if with_results:
            lines.append(rec(kind="tool_result", call_id=f"c{i}", recorded=False))
    return "\n".join(lines)


def test_exact_catches_a_repeat_of_calls_whose_results_were_not_recorded():
    (ep,) = loads_trace(_trace_of_repeats(with_results=True)).episodes
    assert verdicts(ExactDetector(), ep) == ["allow", "prune", "prune", "prune"]
    # Without any tool_result the calls never ran, and there is nothing to repeat.
    (never,) = loads_trace(_trace_of_repeats(with_results=False)).episodes
    assert verdicts(ExactDetector(), never) == ["allow"] * 4


def _fake_guard(**params):
    return ProgressGuard(embedder=Embedder(encode=HashingEncoder(), model_name="fake-bow"), **params)


def test_progress_guard_catches_a_result_less_repeat_after_its_retries():
    # progress_guard lets a call without a result be asked again max_retries times (the agent
    # may have got no answer), then flags the repeat from its arguments alone.
    (ep,) = loads_trace(_trace_of_repeats(with_results=True)).episodes
    assert [s.verdict.value for s in score_episode(_fake_guard(max_retries=1), ep)] == ["allow", "allow", "nudge", "stop"]


def _distinct_calls(n: int, content) -> Episode:
    return linear_episode("d", [("read_file", {"path": f"src/file_{i}.py"}, content) for i in range(n)])


@pytest.mark.parametrize("make", [NoProgressDetector, _fake_guard], ids=["no_progress", "progress_guard"])
def test_unknown_results_are_not_counted_as_no_progress(make):
    # Twelve different calls without recorded results: nothing says the agent learned nothing.
    assert set(verdicts(make(), _distinct_calls(12, UNRECORDED))) == {"allow"}
    # The same calls returning the same text do trigger it, so the check above can fail.
    assert set(verdicts(make(), _distinct_calls(12, "no such file"))) != {"allow"}


@pytest.mark.parametrize("make", [NoProgressDetector, _fake_guard], ids=["no_progress", "progress_guard"])
def test_unknown_results_are_not_counted_as_progress_either(make):
    # A first result, then three stale ones with unrecorded calls in between: the unrecorded
    # calls neither extend the stale streak (no alarm before the probe) nor reset it (the
    # probe after the third stale result is flagged; patience is 3).
    stale = [("read_file", {"path": f"src/f{i}.py"}, "the listing shows the same three entries as before") for i in range(4)]
    gap = [("read_file", {"path": f"src/g{i}.py"}, UNRECORDED) for i in range(3)]
    probe = ("read_file", {"path": "src/probe.py"}, "unused")
    ep = linear_episode("s", stale[:2] + gap + stale[2:] + [probe])
    out = verdicts(make(), ep)
    assert out[:-1] == ["allow"] * 7
    assert out[-1] == "nudge"


# -- closed loop -------------------------------------------------------------------------
class Spy(Detector):
    """Allows everything and keeps what record() was told."""

    def __init__(self):
        self.seen = []

    def check(self, state, call):
        return allow(0)

    def record(self, state, call, decision, observation):
        self.seen.append(observation)
        return state


def test_closed_loop_tells_the_detector_results_were_not_recorded():
    sc = make_scenario("stale", 0)
    spy = Spy()
    res = simulate(sc, spy, results_recorded=False)
    assert spy.seen and all(o is not None and not o.recorded and o.content is None for o in spy.seen)
    assert any(o.error for o in spy.seen) == any(n.observation.error for n in res.episode.tool_nodes())
    # The agent and the episode keep the real results.
    assert all(n.observation.recorded and n.observation.content for n in res.episode.tool_nodes())
    plain = Spy()
    simulate(sc, plain)
    assert all(o.recorded for o in plain.seen)


def test_closed_loop_without_results_exact_still_intervenes_and_no_progress_does_not():
    sc = make_scenario("stale", 0)
    assert simulate(sc, ExactDetector(), results_recorded=False).stats.interventions
    assert simulate(sc, NoProgressDetector(patience=2)).stats.interventions  # with results it does
    assert not simulate(sc, NoProgressDetector(patience=2), results_recorded=False).stats.interventions
