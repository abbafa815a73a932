"""max_turns baseline: a plain turn budget."""
from detectors.field.max_turns import MaxTurnsDetector
from detectors.protocol import ToolCall


def test_default_is_ten_turns(verdicts):
    out = verdicts(MaxTurnsDetector(), [("search", {"q": str(i)}) for i in range(12)])
    assert out == ["allow"] * 10 + ["stop"] * 2


def test_calls_of_one_turn_count_once(verdicts, scores):
    items = [ToolCall("read_file", {"p": f"{t}-{j}"}, turn=t) for t in range(4) for j in range(3)]
    assert scores(MaxTurnsDetector(max_turns=3), items) == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert verdicts(MaxTurnsDetector(max_turns=3), items)[9:] == ["stop"] * 3
