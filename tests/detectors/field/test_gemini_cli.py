"""Gemini CLI baseline: order-sensitive keys, cycles of 1..5 repeated 5 times, strike 1 nudge / strike 2 stop."""
from detectors.field.gemini_cli import STOP_LINE, GeminiCliDetector
from detectors.protocol import Message, Observation, ToolCall


def test_five_identical_calls_nudge_then_stop(verdicts):
    out = verdicts(GeminiCliDetector(), [("read_file", {"path": "a.py"}, "same")] * 7)
    assert out == ["allow"] * 4 + ["nudge", "stop", "stop"]


def test_nudge_message_is_gemini_text(feed):
    det = GeminiCliDetector()
    s = feed(det, [ToolCall("read_file", {"path": "a.py"})] * 4)
    d = det.check(s, ToolCall("read_file", {"path": "a.py"}))
    assert d.message.startswith("System: Potential loop detected. Details: ")
    assert "Please take a step back" in d.message


def test_key_reordered_repeat_is_missed(verdicts):
    # Three keys give six orders: six calls that are the same call to a sorted-key guard.
    orders = [("a", "b", "c"), ("a", "c", "b"), ("b", "a", "c"), ("b", "c", "a"), ("c", "a", "b"), ("c", "b", "a")]
    items = [("search", {k: 1 for k in order}) for order in orders]
    assert verdicts(GeminiCliDetector(), items) == ["allow"] * 6
    same_order = [("search", {"a": 1, "b": 1, "c": 1})] * 6
    assert verdicts(GeminiCliDetector(), same_order)[4] == "nudge"


def test_cycles_of_length_two_to_five_detected_after_five_repetitions(verdicts, first):
    for k in range(2, 6):
        items = [("read_file", {"path": f"f{i % k}"}) for i in range(5 * k + 2)]
        assert first(verdicts(GeminiCliDetector(), items)) == 5 * k - 1, k


def test_cycle_of_six_is_missed(verdicts):
    items = [("read_file", {"path": f"f{i % 6}"}) for i in range(60)]
    assert set(verdicts(GeminiCliDetector(), items)) == {"allow"}


def test_interleaved_repeat_is_missed(verdicts):
    # A X A Y A ...: not contiguous, no fixed cycle.
    items = []
    for i in range(12):
        items += [("search", {"q": "revenue"}), ("calc", {"e": str(i)})]
    assert set(verdicts(GeminiCliDetector(), items)) == {"allow"}


def test_second_loop_in_the_same_prompt_stops(verdicts):
    items = [("a", {})] * 5 + [("b", {})] + [("c", {})] * 5
    out = verdicts(GeminiCliDetector(), items)
    assert out[4] == "nudge" and out[10] == "stop" and out.count("nudge") == 1


def test_compliant_agent_after_nudge_is_not_stopped(verdicts):
    items = [("a", {})] * 5 + [("b", {"i": i}) for i in range(10)]
    out = verdicts(GeminiCliDetector(), items)
    assert out[4] == "nudge" and set(out[5:]) == {"allow"}


def test_user_message_starts_a_new_prompt(verdicts):
    items = [("a", {})] * 5 + [Message("user", "next task")] + [("a", {})] * 5
    out = verdicts(GeminiCliDetector(), items)
    assert out == ["allow"] * 4 + ["nudge"] + ["allow"] * 4 + ["nudge"]
    # an agent message is not a new prompt
    items[5] = Message("assistant", "thinking")
    assert verdicts(GeminiCliDetector(), items)[5] == "stop"


def test_polling_with_changing_results_is_flagged(verdicts):
    # Gemini never looks at results: a documented weakness.
    items = [("check_status", {"job": 1}, f"running {i}%") for i in range(5)]
    assert verdicts(GeminiCliDetector(), items)[4] == "nudge"


def test_score_is_repetitions_of_best_cycle(scores):
    items = [("read_file", {"path": f"f{i % 2}"}) for i in range(10)]
    assert scores(GeminiCliDetector(), items) == [1, 1, 1, 2, 2, 3, 3, 4, 4, 5]


def test_stop_streams_gemini_line():
    det = GeminiCliDetector(threshold=2)
    s = det.start()
    decisions = []
    for _ in range(3):
        call = ToolCall("x", {})
        d = det.check(s, call)
        s = det.record(s, call, d, Observation("r"))
        decisions.append(d)
    assert decisions[1].verdict.value == "nudge" and decisions[2].stream == (STOP_LINE,)
