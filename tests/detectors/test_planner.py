"""The plan cursor of seed 002."""
from detectors.planner import PlannerDetector, PlanState, progress_text
from detectors.protocol import Message, Observation, ToolCall, Verdict


def step(det, s, name, tool="t"):
    c = ToolCall(tool, {"s": name}, step=name)
    d = det.check(s, c)
    return d, det.record(s, c, d, Observation("ok") if not d.alarm else None)


def test_refuses_a_done_step_and_redirects_to_the_next_open_one():
    det = PlannerDetector()
    s = det.on_message(det.start(), Message("assistant", "", ("load", "clean", "plot")))
    d, s = step(det, s, "load")
    assert d.verdict is Verdict.ALLOW
    d, s2 = step(det, s, "load")
    assert d.verdict is Verdict.NUDGE
    assert d.message == "Planner: 'load' is already done. Do 'clean' instead."
    assert s2 == s  # a refused redo marks nothing


def test_plan_complete_ends_the_loop():
    det = PlannerDetector()
    s = det.on_message(det.start(), Message("assistant", "", ("a", "b")))
    _, s = step(det, s, "a")
    _, s = step(det, s, "b")
    assert s.complete and s.next_step() is None
    d = det.check(s, ToolCall("t", {}, step=None))
    assert d.verdict is Verdict.STOP


def test_agents_without_a_plan_are_never_flagged():
    det = PlannerDetector()
    s = det.start()
    for _ in range(3):
        d, s = step(det, s, "x")
        assert d.verdict is Verdict.ALLOW


def test_a_sloppy_replan_keeps_finished_steps_finished():
    det = PlannerDetector()
    s = det.on_message(det.start(), Message("assistant", "", ("a", "b", "c")))
    _, s = step(det, s, "a")
    s = det.on_message(s, Message("assistant", "re-plan", ("a", "c", "d")))
    d, _ = step(det, s, "a")
    assert d.verdict is Verdict.NUDGE and "Do 'c' instead" in d.message


def test_progress_text_matches_the_seed():
    assert progress_text("a", PlanState(("a", "b"), frozenset({"a"}))) == "Planner: 'a' complete. 1/2 done."
