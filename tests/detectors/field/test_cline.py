"""Cline baseline: sorted keys minus task_progress, soft warning at 3, user decides at 5."""
from detectors.field.cline import ClineDetector
from detectors.protocol import Message, Observation, ToolCall


def test_soft_once_at_three_hard_from_five(verdicts):
    out = verdicts(ClineDetector(), [("read_file", {"path": "a"})] * 6)
    assert out == ["allow", "allow", "nudge", "allow", "escalate", "escalate"]


def test_a_new_run_resets_and_the_switch_turns_it_off(verdicts):
    items = [("x", {})] * 2 + [Message("user", "next task")] + [("x", {})] * 2
    assert set(verdicts(ClineDetector(), items)) == {"allow"}
    assert set(verdicts(ClineDetector(enabled=False), [("x", {})] * 8)) == {"allow"}


def test_soft_message_names_tool_and_count(feed):
    det = ClineDetector()
    s = feed(det, [ToolCall("read_file", {"path": "a"})] * 2)
    d = det.check(s, ToolCall("read_file", {"path": "a"}))
    assert d.message.startswith("Tool [read_file] has been called 3 times consecutively with identical arguments")


def test_task_progress_is_ignored_unless_configured(verdicts):
    items = [("edit", {"path": "a", "task_progress": f"- [x] {i}"}) for i in range(5)]
    assert verdicts(ClineDetector(), items)[2] == "nudge"
    assert set(verdicts(ClineDetector(ignored_params=()), items)) == {"allow"}


def test_consecutive_only(verdicts):
    items = [("write_to_file", {"p": "a"}), ("replace_in_file", {"p": "a"})] * 10
    assert set(verdicts(ClineDetector(), items)) == {"allow"}


def test_nudged_repeats_still_count_toward_hard():
    # Closed loop: the soft nudge replaces the call; a model that ignores it is handed over.
    det = ClineDetector()
    s = det.start()
    out = []
    for _ in range(5):
        call = ToolCall("x", {})
        d = det.check(s, call)
        obs = Observation(d.message, nudge=True) if d.verdict.value == "nudge" else (None if d.alarm else Observation("r"))
        s = det.record(s, call, d, obs)
        out.append(d.verdict.value)
    assert out == ["allow", "allow", "nudge", "allow", "escalate"]
