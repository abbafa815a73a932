"""OpenClaw baseline: result-aware warnings at 10 and blocks at 20 over a 30-call window."""
from detectors.field.openclaw import OpenClawDetector
from detectors.protocol import Observation, ToolCall


def test_identical_outcomes_warn_at_ten_block_after_twenty(verdicts):
    out = verdicts(OpenClawDetector(), [("search", {"q": "x"}, "same")] * 22)
    assert out.index("nudge") == 9 and out.index("prune") == 20


def test_changing_results_warn_but_never_block(verdicts):
    out = verdicts(OpenClawDetector(), [("search", {"q": "x"}, f"page noise {i}") for i in range(40)])
    assert out.index("nudge") == 9 and "prune" not in out


def test_scattered_repeats_within_window(verdicts):
    items = []
    for i in range(12):
        items += [("read_file", {"path": "a"}, "A"), ("read_file", {"path": f"other{i}"}, str(i))]
    assert verdicts(OpenClawDetector(), items).index("nudge") == 18  # the 10th read of a, not consecutive


def test_poll_tool_is_progress_aware(verdicts):
    changing = [("check_status", {"job": 1}, f"running {i}%") for i in range(30)]
    assert set(verdicts(OpenClawDetector(), changing)) == {"allow"}
    stuck = [("check_status", {"job": 1}, "running 50%")] * 22
    out = verdicts(OpenClawDetector(), stuck)
    assert out.index("nudge") == 10 and out.index("prune") == 20  # 10 and 20 identical outcomes seen


def test_ping_pong(verdicts):
    stable = [("read_file", {"p": "a"}, "A"), ("edit", {"p": "a"}, "no change")] * 12
    out = verdicts(OpenClawDetector(), stable)
    assert out.index("nudge") == 9 and out.index("prune") == 19
    progressing = [("read_file", {"p": "a"}, "A"), ("edit", {"p": "a"}, None)] * 12
    progressing = [(t, a, c if c else f"edit {i}") for i, (t, a, c) in enumerate(progressing)]
    out = verdicts(OpenClawDetector(), progressing)
    assert out.index("nudge") == 9 and "prune" not in out


def test_block_is_sticky_because_a_veto_leaves_no_result(feed):
    det = OpenClawDetector()
    call = ToolCall("search", {"q": "x"})
    s = feed(det, [call] * 20, Observation("same"))
    for _ in range(3):
        d = det.check(s, call)
        assert d.verdict.value == "prune"
        s = det.record(s, call, d, None)


def test_unknown_tool_keyed_on_name(verdicts):
    items = [("serach", {"q": str(i)}, "unknown tool", True) for i in range(11)]
    assert verdicts(OpenClawDetector(known_tools=("search",)), items).index("prune") == 9
    assert set(verdicts(OpenClawDetector(), items)) == {"allow"}
