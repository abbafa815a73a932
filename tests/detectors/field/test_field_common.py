"""Every field baseline: registered, runs on a mixed trace, keeps its state immutable, honours its score contract."""
import math

import pytest

from detectors.protocol import Detector, Message, Observation, ToolCall
from detectors.registry import available, make_detector
from sim.play.openloop import score_episode
from scenarios.tree import Episode, ToolNode

FIELD = ["openhands", "openhands_sdk", "gemini_cli", "roo_code", "cline", "goose", "crewai", "openclaw", "max_turns",
         "deepagents", "gptme", "pingpong"]


def mixed_items():
    """30 calls: healthy work, polling, errors, a stale loop, an alternation, odd arguments, messages."""
    items = [Message("user", "find the Q3 revenue and fix the failing test"), Message("assistant", "searching")]
    items += [("search", {"q": f"topic {i}", "limit": 5}, f"doc {i}") for i in range(3)]
    items += [("check_status", {"job": 7}, f"running {10 * i}%") for i in range(4)]
    items += [Message("assistant", "retrying")]
    items += [("http_get", {"url": f"https://api/x/{i}"}, "503 Service Unavailable", True) for i in range(3)]
    items += [("read_file", {"path": "a.py", "opts": {"b": 1, "a": [1, 2]}}, "same")] * 6
    items += [Message("system", "harness note")]
    items += [("read_file", {"path": "a.py"}, "A"), ("write_file", {"path": "a.py", "text": "x"}, "ok")] * 4
    items += [("calc", {"e": float("nan")}, {"value": None}), ("calc", {"e": 10**30}, "big"),
              ("search", {"q": "ünïcödé", "tags": ["x", {"y": True}]}, ["list", "result"])]
    items += [ToolCall("search", {"q": "burst"}, turn=99), ToolCall("search", {"q": "burst"}, turn=99)]
    items += [Message("user", "thanks"), ("search", {"q": "done"}, "")]
    return items


def test_all_registered():
    assert set(FIELD) <= set(available())


@pytest.mark.parametrize("name", FIELD)
def test_runs_on_mixed_trace_with_finite_scores(name, episode):
    det = make_detector(name)
    trace = episode(mixed_items())
    assert len(trace.tool_nodes()) == 30
    out = score_episode(det, trace)
    assert len(out) == 30
    assert all(math.isfinite(cs.score) for cs in out)
    assert det.scope in ("path", "run")
    # the parameters rebuild an equivalent detector
    clone = det.clone()
    assert [cs.verdict for cs in score_episode(clone, trace)] == [cs.verdict for cs in out]


def _walk(det: Detector, items):
    """Check and record every item, keeping each state and the decision taken from it."""
    state = det.start()
    taken = []
    for item in items:
        if isinstance(item, Message):
            state = det.on_message(state, item)
            continue
        call = item if isinstance(item, ToolCall) else ToolCall(item[0], item[1])
        obs = Observation("r") if isinstance(item, ToolCall) else Observation(*item[2:4]) if len(item) > 2 else Observation("r")
        d = det.check(state, call)
        taken.append((state, call, d))
        state = det.record(state, call, d, obs)
    return taken


@pytest.mark.parametrize("name", FIELD)
def test_state_is_never_mutated(name):
    # A parent's state is shared by sibling branches: checking from an old state later must
    # give the same answer as it did then.
    det = make_detector(name)
    taken = _walk(det, mixed_items())
    for state, call, d in taken:
        again = det.check(state, ToolCall(call.tool, dict(call.args), turn=call.turn))
        assert (again.verdict, again.score) == (d.verdict, d.score)


@pytest.mark.parametrize("name", FIELD)
def test_score_contract(name):
    det = make_detector(name)
    loops = mixed_items() + [("read_file", {"path": "b"}, "same")] * 25
    for state, call, d in _walk(det, loops):
        if det.threshold_param is not None:
            thr = det.threshold_for(call.tool, getattr(det, det.threshold_param))
            assert d.alarm == (d.score >= thr), (call, d)
        else:
            assert d.alarm == (d.score >= 1.0), (call, d)


@pytest.mark.parametrize("name", [n for n in FIELD if n != "max_turns"])
def test_catches_a_long_exact_loop(name, episode):
    det = make_detector(name)
    out = score_episode(det, episode([("search", {"q": "x"}, "same")] * 25))
    assert any(cs.verdict.value != "allow" for cs in out)


@pytest.mark.parametrize("name", FIELD)
def test_sibling_branches_do_not_see_each_other(name):
    # Root call, then three sibling branches with the same call: each path has it twice at most.
    ep = Episode("tree")
    ep.add(ToolNode("r", None, ToolCall("search", {"q": "x"}), Observation("same")))
    for i in range(3):
        ep.add(ToolNode(f"b{i}", "r", ToolCall("search", {"q": "y"}), Observation("same")))
    out = score_episode(make_detector(name), ep)
    assert len({(cs.score, cs.verdict) for cs in out[1:]}) == 1


@pytest.mark.parametrize("module", ["openhands", "openhands_sdk", "gemini_cli", "roo_code", "cline", "goose", "crewai",
                                    "openclaw", "max_turns", "deepagents", "gptme", "pingpong"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"detectors.field.{module}"))
    assert result.attempted > 0 and result.failed == 0
