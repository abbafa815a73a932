"""Roo Code baseline: sorted-key identity, consecutive only, the (limit+1)-th call asks the user."""
from detectors.field.roo_code import RooCodeDetector, model_text
from detectors.protocol import ToolCall


def test_fourth_identical_call_escalates_then_the_count_restarts(verdicts):
    out = verdicts(RooCodeDetector(), [("read_file", {"path": "a"})] * 9)
    assert out == ["allow"] * 3 + ["escalate"] + ["allow"] * 3 + ["escalate", "allow"]


def test_browser_scroll_exemption_matches_arguments(verdicts):
    det = RooCodeDetector(limit=2, exempt_calls=[{"tool": "browser_action", "args": {"action": "scroll_down"}}])
    scroll, click = ("browser_action", {"action": "scroll_down"}), ("browser_action", {"action": "click"})
    assert set(verdicts(det, [scroll] * 10)) == {"allow"}
    assert verdicts(det, [click] * 3)[2] == "escalate"
    assert verdicts(det, [("ls", {}), scroll, ("ls", {}), scroll, ("ls", {})])[4] == "escalate"


def test_messages_for_model_and_user(feed):
    det = RooCodeDetector(limit=1)
    s = feed(det, [ToolCall("read_file", {"path": "a"})])
    d = det.check(s, ToolCall("read_file", {"path": "a"}))
    assert d.message == "Tool call repetition limit reached for read_file. Please try a different approach." == model_text("read_file")
    assert d.stream[0].startswith("Roo appears to be stuck in a loop, attempting the same action (read_file)")


def test_key_order_does_not_matter(verdicts):
    items = [("s", {"a": 1, "b": 2}), ("s", {"b": 2, "a": 1})] * 2
    assert verdicts(RooCodeDetector(), items)[3] == "escalate"


def test_alternation_never_accumulates(verdicts):
    items = [("read_file", {"path": "a"}), ("read_file", {"path": "b"})] * 20
    assert set(verdicts(RooCodeDetector(), items)) == {"allow"}


def test_limit_one_does_not_block_the_first_call(verdicts):
    assert verdicts(RooCodeDetector(limit=1), [("x", {})] * 2) == ["allow", "escalate"]


def test_limit_zero_is_unlimited(verdicts):
    assert set(verdicts(RooCodeDetector(limit=0), [("x", {})] * 30)) == {"allow"}


def test_exempt_tool_is_transparent(verdicts):
    items = [("read_file", {"p": 1}), ("scroll", {}), ("read_file", {"p": 1}), ("scroll", {}), ("read_file", {"p": 1}), ("read_file", {"p": 1})]
    assert set(verdicts(RooCodeDetector(), items)) == {"allow"}
    out = verdicts(RooCodeDetector(tool_overrides={"scroll": {"exempt": True}}), items)
    assert out == ["allow"] * 5 + ["escalate"]


def test_per_tool_limit_and_score_contract(scores):
    det = RooCodeDetector(tool_overrides={"browser_action": {"limit": 6}})
    assert det.threshold_for("browser_action", 3) == 6 and det.threshold_for("x", 3) == 3
    assert scores(det, [("x", {})] * 5) == [0, 1 / 3, 2 / 3, 1, 0]  # the count restarts after the block
