"""The three newer field guards: pydantic-deepagents, gptme's stuck hook, the zeroclaw-style ping-pong guard."""
import pytest

from detectors.field.deepagents import DeepAgentsDetector
from detectors.field.gptme import GptmeDetector
from detectors.field.pingpong import PingPongDetector
from detectors.protocol import Message, Observation, ToolCall


def closed_loop(det, calls):
    """Verdicts when the harness obeys: a nudged call is answered by the nudge, a pruned one does not run."""
    s, out = det.start(), []
    for call in calls:
        d = det.check(s, call)
        obs = Observation(d.message, nudge=True) if d.verdict.value == "nudge" else (None if d.alarm else Observation("same"))
        s = det.record(s, call, d, obs)
        out.append(d.verdict.value)
    return out


@pytest.mark.parametrize("kwargs", [{"max_repeated": 1}, {"action": "crash"}])
def test_deepagents_rejects_what_the_project_rejects(kwargs):
    with pytest.raises(ValueError):
        DeepAgentsDetector(**kwargs)


def test_deepagents_noop_fires_on_the_call_after_the_third_same_result(verdicts):
    items = [("list_files", {"path": f"/{i}"}, ["a.py"]) for i in range(4)]
    assert verdicts(DeepAgentsDetector(detect_repeated=False), items) == ["allow"] * 3 + ["nudge"]
    assert verdicts(DeepAgentsDetector(action="error"), [("grep", {"p": "x"}, f"r{i}") for i in range(3)])[2] == "stop"


def test_gptme_calls_inside_a_turn_are_not_checked_and_order_does_not_matter():
    det = GptmeDetector()
    a, b = {"path": "a"}, {"path": "b"}
    calls = []
    for turn in range(4):
        order = (a, b) if turn % 2 else (b, a)
        calls += [ToolCall("save", order[0], turn=turn), ToolCall("save", order[1], turn=turn)]
    assert closed_loop(det, calls) == ["allow"] * 6 + ["nudge", "allow"]


def test_gptme_closed_loop_escalates_then_stops_and_a_user_turn_resets_escalations(verdicts):
    call = ToolCall("save", {"path": "a"})
    assert closed_loop(GptmeDetector(), [call] * 6) == ["allow"] * 3 + ["nudge", "nudge", "stop"]
    items = [("save", {"path": "a"})] * 3 + [Message("user", "keep going")] + [("save", {"path": "a"})] * 2
    out = verdicts(GptmeDetector(), items)
    assert out[3:] == ["nudge", "nudge"]  # repeats 3 and 4 nudge; the user reply cleared the first escalation
    assert set(verdicts(GptmeDetector(interactive=True), [("save", {"path": "a"})] * 9)) == {"allow", "nudge"}


def test_pingpong_ladder_and_tool_name_alternation(verdicts):
    same = verdicts(PingPongDetector(), [("search", {"q": "x"}, "none")] * 6)
    assert same == ["allow", "allow", "nudge", "prune", "stop", "stop"]
    alternating = [("read" if i % 2 == 0 else "write", {"n": i}, f"r{i}") for i in range(12)]
    assert verdicts(PingPongDetector(), alternating).index("nudge") == 7  # 4 cycles, arguments ignored
    three_way = [(t, {}, "x") for t in ("a", "b", "c") * 6]
    assert "nudge" not in verdicts(PingPongDetector(no_progress_calls=99), three_way)


def test_pingpong_no_progress_counts_scattered_same_results(verdicts):
    items = []
    for i in range(6):
        items += [("search", {"q": f"v{i}"}, "no results"), (f"reader_{i}", {"p": i}, f"body {i}")]
    out = verdicts(PingPongDetector(), items)
    assert out.index("nudge") == 9 and out[11] == "prune"
    with pytest.raises(ValueError):
        PingPongDetector(max_repeats=0)
