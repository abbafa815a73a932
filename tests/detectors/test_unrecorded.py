"""Detectors and calls that ran without a recorded result (``Observation.recorded`` false)."""
import pytest

from detectors.field.goose import GooseDetector
from detectors.field.openclaw import OpenClawDetector
from detectors.field.openhands import OpenHandsDetector
from detectors.progress_guard import ProgressGuard
from detectors.protocol import UNRECORDED, Observation, ToolCall, ran, result_known, unrecorded
from detectors.registry import available, make_detector
from detectors.testing import run_trace


def calls(*items):
    """Events for (tool, args, observation) triples, no messages."""
    return [("call", ToolCall(tool, args, f"c{i}", turn=i), obs) for i, (tool, args, obs) in enumerate(items)]


def verdicts(detector, events):
    return [d.verdict.value for d in run_trace(detector, events)[0]]


def test_the_protocol_tells_ran_from_result_known():
    table = {None: (False, False), UNRECORDED: (True, False), unrecorded(True): (True, False),
             Observation("r"): (True, True), Observation(None): (True, True),
             Observation("Loop guard: stop", nudge=True): (False, False)}
    assert {k: (ran(k), result_known(k)) for k in table} == table
    assert unrecorded(True).error and not unrecorded().error and unrecorded() is UNRECORDED
    # Positional construction is unchanged: recorded is a new last field with a default.
    assert Observation("r", True, False) == Observation("r", error=True, nudge=False, recorded=True)


@pytest.mark.parametrize("name", [n for n in available() if not n.startswith("embedding")])
def test_every_detector_takes_unrecorded_results_including_errors(name):
    kw = {"semantic": False} if name == "progress_guard" else {}
    det = make_detector(name, **kw)
    events = calls(*[(t, {"q": q}, unrecorded(err)) for t, q, err in
                     [("search", "a", False), ("http_get", "b", True), ("search", "a", False), ("check_status", "j", False),
                      ("check_status", "j", True), ("read_file", "c", True), ("read_file", "c", True)]])
    for d in run_trace(det, events)[0]:
        assert d.score == d.score and abs(d.score) != float("inf")


def test_openhands_compares_no_unknown_observations_but_counts_unknown_errors():
    same = calls(*[("search", {"q": "x"}, UNRECORDED)] * 6)
    assert set(verdicts(OpenHandsDetector(), same)) == {"allow"}
    # The same calls with the same recorded result are stuck at the 5th (4 action-observation pairs).
    recorded = calls(*[("search", {"q": "x"}, Observation("r"))] * 6)
    assert verdicts(OpenHandsDetector(), recorded)[4] != "allow"
    # The error flag is known without the text: repeating_action_error still sees the streak.
    errors = run_trace(OpenHandsDetector(), calls(*[("search", {"q": "x"}, unrecorded(True))] * 5))[0]
    stuck = [d for d in errors if d.alarm]
    assert stuck and stuck[0].events[0][1]["loop_type"] == "repeating_action_error"


def test_goose_same_error_streak_is_neither_extended_nor_broken_by_an_error_without_text():
    boom = Observation("500 boom", error=True)
    seq = [("http_get", {"u": 1}, boom), ("http_get", {"u": 2}, unrecorded(True)), ("http_get", {"u": 3}, boom),
           ("http_get", {"u": 4}, boom), ("http_get", {"u": 5}, Observation("ok"))]
    # boom, ?, boom, boom: three same errors in a row once the unknown one is left out -> the 5th is denied.
    assert verdicts(GooseDetector(), calls(*seq)) == ["allow", "allow", "allow", "allow", "prune"]
    # A success without a recorded result is still a success: it resets the streak.
    seq[1] = ("http_get", {"u": 2}, UNRECORDED)
    assert verdicts(GooseDetector(), calls(*seq)) == ["allow"] * 5


def test_openclaw_counts_result_less_repeats_but_finds_no_stable_outcome_in_them():
    det = OpenClawDetector()
    out = verdicts(det, calls(*[("search", {"q": "x"}, UNRECORDED)] * 25))
    assert "nudge" in out  # the generic-repeat warning counts arguments only
    assert "prune" not in out  # the critical rules need outcomes known to be the same
    known = verdicts(OpenClawDetector(), calls(*[("search", {"q": "x"}, Observation("same"))] * 25))
    assert "prune" in known


def _guard(**kw):
    return ProgressGuard(semantic=False, **kw)


@pytest.mark.parametrize("obs", [UNRECORDED, unrecorded(True)], ids=["ok", "error"])
def test_progress_guard_lets_a_result_less_call_be_asked_again_max_retries_times(obs):
    # The agent may have got no answer: asking again is a retry, up to max_retries.
    seq = [("search", {"query": "q3 revenue"}, obs)] * 6
    assert verdicts(_guard(), calls(*seq)) == ["allow"] * 4 + ["nudge", "stop"]
    assert verdicts(_guard(max_retries=1), calls(*seq))[:3] == ["allow", "allow", "nudge"]
    # A recorded answer in between ends the allowance: the next repeat is a repeat.
    seq[1] = ("search", {"query": "q3 revenue"}, Observation("3 results: report-q3"))
    assert verdicts(_guard(), calls(*seq))[2] == "nudge"


def test_progress_guard_polls_without_results_only_hit_the_poll_limit():
    seq = [("check_status", {"job": "j"}, UNRECORDED)] * 7
    assert verdicts(_guard(), calls(*seq)) == ["allow"] * 7  # "same answer twice" needs answers
    assert verdicts(_guard(poll_limit=5), calls(*seq))[5] == "nudge"


def test_progress_guard_unknown_results_do_not_count_as_recovery():
    # Nudged at the repeat; then result-less new calls; a second repeat still stops (no recovery).
    seq = [("search", {"query": "a"}, Observation("alpha")), ("search", {"query": "a"}, Observation("alpha")),
           ("read_file", {"path": "x.md"}, UNRECORDED), ("search", {"query": "a"}, Observation("alpha"))]
    assert verdicts(_guard(), calls(*seq)) == ["allow", "nudge", "allow", "stop"]
    seq[2] = ("read_file", {"path": "x.md"}, Observation("a brand new finding"))
    assert verdicts(_guard(), calls(*seq)) == ["allow", "nudge", "allow", "nudge"]  # a known new result does


@pytest.mark.parametrize("name", ["deepagents", "pingpong"])
def test_same_result_rules_of_the_newer_baselines_need_known_results(name):
    # Different arguments, one tool: only a "same result" rule could fire, and only on known results.
    unknown = calls(*[("grep", {"pattern": f"p{i}"}, UNRECORDED) for i in range(8)])
    assert set(verdicts(make_detector(name), unknown)) == {"allow"}
    same = calls(*[("grep", {"pattern": f"p{i}"}, Observation("no matches")) for i in range(8)])
    assert set(verdicts(make_detector(name), same)) != {"allow"}
