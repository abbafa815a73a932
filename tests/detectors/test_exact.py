"""The tree executor's exact detector, pinned to seed 000."""
from detectors.exact import ExactDetector, stream_line
from detectors.protocol import Observation, ToolCall, Verdict
from detectors.signature import exact_signature


def feed(det, state, call, obs="r"):
    d = det.check(state, call)
    return d, det.record(state, call, d, Observation(obs) if d.verdict is Verdict.ALLOW else None)


def test_signature_ignores_key_order_recursively():
    a = exact_signature("t", {"a": 1, "b": {"x": [1, {"p": 1, "q": 2}], "y": 2}})
    b = exact_signature("t", {"b": {"y": 2, "x": [1, {"q": 2, "p": 1}]}, "a": 1})
    assert a == b
    assert a != exact_signature("t", {"a": 1, "b": {"x": [{"p": 1, "q": 2}, 1], "y": 2}})  # list order matters
    assert exact_signature("t", {"a": "1"}) != exact_signature("t", {"a": 1})  # value types matter
    assert exact_signature("t", {"a": 1}) != exact_signature("u", {"a": 1})


def test_default_forbids_any_repeat_on_a_path_and_prunes_with_the_seed_line():
    det = ExactDetector()
    s = det.start()
    d1, s = feed(det, s, ToolCall("search", {"q": "x", "n": 1}))
    assert d1.verdict is Verdict.ALLOW and d1.score == 0
    d2, s2 = feed(det, s, ToolCall("search", {"n": 1, "q": "x"}))
    assert d2.verdict is Verdict.PRUNE and d2.score == 1
    assert d2.stream == ('[tree] Loop detected: search({"n":1,"q":"x"}) already in path — pruning branch',)
    assert d2.events[0][0] == "loop:detected"
    assert s2 is s  # a pruned call never ran, so it does not extend the path


def test_per_tool_override_lets_a_retry_safe_tool_repeat():
    det = ExactDetector(tool_overrides={"http_get": {"max_repeats": 3}})
    s = det.start()
    call = ToolCall("http_get", {"url": "u"})
    verdicts = []
    for _ in range(5):
        d, s = feed(det, s, call)
        verdicts.append(d.verdict)
    assert verdicts == [Verdict.ALLOW] * 3 + [Verdict.PRUNE] * 2
    # Tools without an override keep the global default.
    d, s = feed(det, s, ToolCall("search", {"q": 1}))
    d, s = feed(det, s, ToolCall("search", {"q": 1}))
    assert d.verdict is Verdict.PRUNE


def test_extend_path_is_immutable_so_siblings_share_the_parent():
    det = ExactDetector()
    parent = det.start()
    _, parent = feed(det, parent, ToolCall("a", {}))
    snapshot = dict(parent)
    _, left = feed(det, parent, ToolCall("x", {"i": 1}))
    d_right, _ = feed(det, parent, ToolCall("x", {"i": 1}))
    assert dict(parent) == snapshot
    assert d_right.verdict is Verdict.ALLOW  # called once in branch A and once in branch B: no loop
    assert det.check(left, ToolCall("x", {"i": 1})).verdict is Verdict.PRUNE


def test_exempt_tool_is_never_flagged_and_threshold_for_reports_it():
    det = ExactDetector(tool_overrides={"check_status": {"exempt": True}})
    s = det.start()
    for _ in range(4):
        d, s = feed(det, s, ToolCall("check_status", {"job_id": "j"}))
        assert d.verdict is Verdict.ALLOW
    assert det.threshold_for("check_status", 1) == float("inf")
    assert det.threshold_for("search", 2) == 2


def test_stream_line_names_tool_and_args():
    assert stream_line(ToolCall("read_file", {"path": "a.py"})) == \
        '[tree] Loop detected: read_file({"path":"a.py"}) already in path — pruning branch'
