"""CrewAI baseline: the 2nd consecutive identical call is refused in band."""
from detectors.field.crewai import REUSE_TEXT, CrewAIDetector
from detectors.protocol import Observation, ToolCall


def test_second_identical_call_is_refused(verdicts):
    assert verdicts(CrewAIDetector(), [("search", {"q": "x"})] * 3) == ["allow", "nudge", "nudge"]


def test_refusal_text_is_crewai_sentence(feed):
    det = CrewAIDetector()
    s = feed(det, [ToolCall("search", {"q": "x", "n": 2})])
    d = det.check(s, ToolCall("search", {"n": 2, "q": "x"}))
    assert d.message == REUSE_TEXT and d.message.startswith("I tried reusing the same input")


def test_errored_call_is_not_last_used(verdicts):
    assert verdicts(CrewAIDetector(), [("t", {}, "boom", True), ("t", {})]) == ["allow", "allow"]


def test_compares_with_last_successful_call_only(verdicts):
    items = [("a", {}, "ok"), ("b", {}, "failed", True), ("a", {})]
    assert verdicts(CrewAIDetector(), items) == ["allow", "allow", "nudge"]
    items = [("a", {}, "ok"), ("b", {}, "ok"), ("a", {})]
    assert set(verdicts(CrewAIDetector(), items)) == {"allow"}


def test_refusals_keep_refusing_and_score_grows(feed):
    det = CrewAIDetector()
    call = ToolCall("a", {})
    s = feed(det, [call])
    got = []
    for _ in range(3):
        d = det.check(s, call)
        s = det.record(s, call, d, Observation(d.message, nudge=True))
        got.append((d.verdict.value, d.score))
    assert got == [("nudge", 1.0), ("nudge", 2.0), ("nudge", 3.0)]
