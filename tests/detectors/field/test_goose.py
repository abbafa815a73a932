"""goose baseline: REP-001 consecutive identical calls (configured), REP-002 the same error with any arguments."""
from detectors.field.goose import GooseDetector
from detectors.protocol import Observation, ToolCall


def test_rep001_denies_the_n_plus_first_identical_call(verdicts):
    out = verdicts(GooseDetector(max_repetitions=3), [("read_file", {"p": "a"})] * 6)
    assert out == ["allow"] * 3 + ["prune"] * 3


def test_rep001_default_is_five_and_none_is_goose_unlimited(verdicts):
    items = [("read_file", {"p": "a"})] * 20
    assert verdicts(GooseDetector(), items).index("prune") == 5
    assert set(verdicts(GooseDetector(max_repetitions=None), items)) == {"allow"}


def test_rep001_structural_equality_ignores_key_order(verdicts):
    items = [("s", {"a": 1, "b": [1, {"c": 2, "d": 3}]}), ("s", {"b": [1, {"d": 3, "c": 2}], "a": 1})] * 2
    assert verdicts(GooseDetector(max_repetitions=2), items)[2] == "prune"


def test_rep001_denied_call_does_not_become_last_call():
    det = GooseDetector(max_repetitions=1)
    s = det.start()
    out = []
    for tool in ["a", "a", "a", "b", "a", "a"]:
        call = ToolCall(tool, {})
        d = det.check(s, call)
        s = det.record(s, call, d, None if d.alarm else Observation("r"))
        out.append(d.verdict.value)
    assert out == ["allow", "prune", "prune", "allow", "allow", "prune"]


def test_rep002_same_error_with_different_arguments(verdicts):
    items = [("http_get", {"url": f"https://api/issues/{i}"}, "404 Not Found", True) for i in range(10)]
    out = verdicts(GooseDetector(), items)
    # denied after 3 identical errors; the counter resets after firing
    assert [i for i, v in enumerate(out) if v == "prune"] == [3, 6, 9]


def test_rep002_success_resets_and_prefix_is_100_chars(verdicts):
    err = ("http_get", {"u": 1}, "500 boom", True)
    ok = ("http_get", {"u": 2}, "fine", False)
    assert set(verdicts(GooseDetector(), [err, err, ok, err, err, ok])) == {"allow"}
    head = "E" * 100
    tails = [(("t", {"i": i}, head + f" detail {i}", True)) for i in range(4)]
    assert verdicts(GooseDetector(), tails)[3] == "prune"  # differs only after 100 chars
    heads = [(("t", {"i": i}, f"{i} " + head, True)) for i in range(4)]
    assert set(verdicts(GooseDetector(), heads)) == {"allow"}


def test_rep002_only_denies_the_failing_tool(verdicts):
    items = [("http_get", {"i": i}, "404", True) for i in range(3)] + [("search", {"q": "x"}), ("http_get", {"i": 9})]
    assert verdicts(GooseDetector(), items) == ["allow"] * 4 + ["allow"]  # search succeeded in between
    items = [("http_get", {"i": i}, "404", True) for i in range(3)] + [("http_get", {"i": 9})]
    assert verdicts(GooseDetector(), items)[3] == "prune"


def test_score_contract(scores):
    s = scores(GooseDetector(max_repetitions=4), [("x", {})] * 5)
    assert s == [0, 0.25, 0.5, 0.75, 1.0]
