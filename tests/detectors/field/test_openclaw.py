"""OpenClaw baseline: result-aware warnings at 10 and blocks at 20 over a 30-call window."""
from detectors.field.openclaw import OpenClawDetector
from detectors.protocol import Message, Observation, ToolCall


def test_identical_outcomes_warn_after_ten_block_after_twenty(verdicts):
    out = verdicts(OpenClawDetector(), [("search", {"q": "x"}, "same")] * 22)
    assert out.index("nudge") == 10 and out.index("prune") == 20


def test_changing_results_warn_but_never_block(verdicts):
    out = verdicts(OpenClawDetector(), [("search", {"q": "x"}, f"page noise {i}") for i in range(40)])
    assert out.index("nudge") == 10 and "prune" not in out


def test_scattered_repeats_within_window(verdicts):
    items = []
    for i in range(12):
        items += [("read_file", {"path": "a"}, "A"), ("read_file", {"path": f"other{i}"}, str(i))]
    assert verdicts(OpenClawDetector(), items).index("nudge") == 20  # the 11th read of a, not consecutive


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


def test_unknown_tool_keyed_on_the_name_in_the_error(verdicts):
    items = [("serach", {"q": str(i)}, "Error: unknown tool 'serach'", True) for i in range(12)]
    assert verdicts(OpenClawDetector(), items).index("prune") == 10  # ten earlier attempts
    vague = [("serach", {"q": str(i)}, "something failed", True) for i in range(12)]
    assert set(verdicts(OpenClawDetector(), vague)) == {"allow"}
    assert verdicts(OpenClawDetector(known_tools=("search",)), vague).index("prune") == 10


def test_disabled_as_openclaw_ships(verdicts):
    assert set(verdicts(OpenClawDetector(enabled=False), [("search", {"q": "x"}, "same")] * 40)) == {"allow"}


def test_exec_results_hashed_without_volatile_details(verdicts):
    def run(i, aggregated):
        return ("exec", {"command": "ls"}, {"content": [{"type": "text", "text": f"pid {i}"}],
                                            "details": {"status": "completed", "exitCode": 0, "durationMs": i, "aggregated": aggregated}})
    assert verdicts(OpenClawDetector(), [run(i, "a b") for i in range(21)])[20] == "prune"
    assert verdicts(OpenClawDetector(), [run(i, f"tick {i}") for i in range(21)])[20] == "nudge"


def test_a_user_turn_starts_a_new_run(verdicts):
    items = [("search", {"q": "x"}, "same")] * 10 + [Message("user", "again")] + [("search", {"q": "x"}, "same")] * 5
    assert set(verdicts(OpenClawDetector(), items)) == {"allow"}
