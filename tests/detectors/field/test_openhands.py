"""OpenHands V0 and SDK baselines: history-only checks, action + observation identity, thought text."""
import pytest

from detectors.field.openhands import STUCK_TEXT, OpenHandsDetector
from detectors.field.openhands_sdk import OpenHandsSDKDetector
from detectors.protocol import Message, Observation, ToolCall


def say(text):
    return Message("assistant", text)


# -- V0 ------------------------------------------------------------------------------


def test_four_identical_pairs_stop_the_next_step(verdicts):
    out = verdicts(OpenHandsDetector(), [("read_file", {"path": "a"}, "same")] * 6)
    assert out == ["allow"] * 4 + ["stop"] * 2


def test_different_output_is_progress_for_dedicated_tools(verdicts):
    items = [("check_status", {"job": 1}, f"running {i}%") for i in range(10)]
    assert set(verdicts(OpenHandsDetector(), items)) == {"allow"}


def test_shell_output_is_ignored_so_shell_polling_is_stuck(verdicts):
    items = [("bash", {"command": "sleep 5; tail log"}, f"line {i}") for i in range(6)]
    assert verdicts(OpenHandsDetector(), items)[4] == "stop"
    # a harness that routes its status tool through the shell
    polls = [("check_status", {"job": 1}, f"running {i}%") for i in range(6)]
    assert verdicts(OpenHandsDetector(shell_tools=("check_status",)), polls)[4] == "stop"
    # the SDK compares the full observation, shell or not
    assert set(verdicts(OpenHandsSDKDetector(), items)) == {"allow"}


def test_three_failures_stop_even_with_different_errors(verdicts):
    items = [("run_tests", {}, f"error {i}", True) for i in range(4)]
    assert verdicts(OpenHandsDetector(), items) == ["allow"] * 3 + ["stop"]


def test_alternation_over_six_steps(verdicts):
    items = [("read_file", {"p": "a"}, "A"), ("edit", {"p": "a"}, "no change")] * 4
    assert verdicts(OpenHandsDetector(), items).index("stop") == 6


def test_thought_text_is_part_of_identity(verdicts):
    same = []
    reworded = []
    for i in range(6):
        same += [say("let me read the file"), ("read_file", {"p": "a"}, "same")]
        reworded += [say(f"let me read the file, attempt {i}"), ("read_file", {"p": "a"}, "same")]
    assert verdicts(OpenHandsDetector(), same).index("stop") == 4
    assert set(verdicts(OpenHandsDetector(), reworded)) == {"allow"}
    assert verdicts(OpenHandsDetector(compare_thought=False), reworded).index("stop") == 4


def test_monologue_of_identical_messages(verdicts):
    items = [("search", {"q": "x"}), say("I am done."), say("I am done."), say("I am done."), say("go"), ("search", {"q": "y"})]
    assert verdicts(OpenHandsDetector(), items) == ["allow", "stop"]
    varied = [("search", {"q": "x"}), say("a"), say("b"), say("c"), say("go"), ("search", {"q": "y"})]
    assert verdicts(OpenHandsDetector(), varied) == ["allow", "allow"]
    # the SDK does not compare the content
    assert verdicts(OpenHandsSDKDetector(), varied) == ["allow", "stop"]


def test_headless_ignores_user_messages_interactive_resets(verdicts):
    items = [("read_file", {"p": "a"}, "same")] * 4 + [Message("user", "continue")] + [("read_file", {"p": "a"}, "same")]
    assert verdicts(OpenHandsDetector(), items)[4] == "stop"
    assert verdicts(OpenHandsDetector(headless_mode=False), items)[4] == "allow"


def test_stuck_event_carries_analysis(feed):
    det = OpenHandsDetector()
    s = feed(det, [ToolCall("other", {"i": 0}), ToolCall("other", {"i": 1})])
    s = feed(det, [ToolCall("read_file", {"p": "a"})] * 4, Observation("same"), state=s)
    d = det.check(s, ToolCall("anything", {}))  # the check does not depend on the next call
    assert d.verdict.value == "stop" and STUCK_TEXT in d.reason
    name, payload = d.events[0]
    assert payload == {"loop_type": "repeating_action_observation", "loop_repeat_times": 4, "loop_start_idx": 2}


# -- SDK -----------------------------------------------------------------------------


def test_sdk_nudges_at_third_failure_then_stuck_open_loop(verdicts):
    items = [("http_get", {"url": "u"}, f"timeout {i}", True) for i in range(6)]
    assert verdicts(OpenHandsSDKDetector(), items) == ["allow"] * 3 + ["nudge"] + ["stop"] * 2


def test_sdk_nudge_names_tool_and_error_and_does_not_reset_window(feed):
    det = OpenHandsSDKDetector()
    s = feed(det, [ToolCall("http_get", {"url": "u"})] * 3, Observation("HTTP 503 try 2", error=True))
    call = ToolCall("http_get", {"url": "u"})
    d = det.check(s, call)
    assert d.verdict.value == "nudge" and "http_get" in d.message and "HTTP 503 try 2" in d.message
    s = det.record(s, call, d, Observation(d.message, nudge=True))
    s = det.on_message(s, Message("system", "Loop guard note"))  # harness text does not reset
    # Once per streak: the model may run the failing call once more, then it is STUCK.
    d = det.check(s, call)
    assert d.verdict.value == "allow" and d.score < 1
    s = det.record(s, call, d, Observation("HTTP 503 try 3", error=True))
    assert det.check(s, ToolCall("search", {"q": "other"})).verdict.value == "stop"


def test_sdk_compliant_agent_after_nudge_is_not_stopped():
    det = OpenHandsSDKDetector()
    s = det.start()
    out = []
    calls = [ToolCall("http_get", {"url": "u"})] * 4 + [ToolCall("search", {"q": str(i)}) for i in range(6)]
    for call in calls:
        d = det.check(s, call)
        obs = Observation(d.message, nudge=True) if d.alarm else Observation("err" if call.tool == "http_get" else call.args["q"], error=call.tool == "http_get")
        s = det.record(s, call, d, obs)
        out.append(d.verdict.value)
    assert out == ["allow"] * 3 + ["nudge"] + ["allow"] * 6


def test_sdk_window_of_twenty_events(verdicts, first):
    items = [("read_file", {"p": "a"}, "same")] * 30
    wide = dict(action_observation=12, alternating_pattern=12)
    assert set(verdicts(OpenHandsSDKDetector(**wide), items)) == {"allow"}  # 24 events never fit in 20
    assert first(verdicts(OpenHandsSDKDetector(max_events=None, **wide), items)) == 12


def test_sdk_user_message_resets(verdicts):
    items = [("read_file", {"p": "a"}, "same")] * 4 + [Message("user", "try again")] + [("read_file", {"p": "a"}, "same")] * 2
    assert verdicts(OpenHandsSDKDetector(), items)[4:] == ["allow", "allow"]


def test_sdk_thresholds_validated():
    with pytest.raises(ValueError, match="action_error"):
        OpenHandsSDKDetector(action_error=0)
