"""Step budget, no-progress check and the layered stack of seed 002."""
from detectors.layers import LayeredDetector, NoProgressDetector, StepBudgetDetector, information_tokens
from detectors.protocol import Observation, ToolCall, Verdict


def drive(det, calls_obs):
    s = det.start()
    out = []
    for call, obs in calls_obs:
        d = det.check(s, call)
        out.append(d)
        s = det.record(s, call, d, obs)
    return out


def test_step_budget_stops_the_call_after_max_steps():
    ds = drive(StepBudgetDetector(max_steps=3), [(ToolCall("t", {"i": i}), Observation(str(i))) for i in range(5)])
    assert [d.verdict for d in ds] == [Verdict.ALLOW] * 3 + [Verdict.STOP] * 2


def test_no_progress_counts_uninformative_results_even_with_noise():
    base = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma"
    obs = [Observation(f"{base} took {i} ms") for i in range(6)]
    ds = drive(NoProgressDetector(patience=3), [(ToolCall("t", {"i": i}), o) for i, o in enumerate(obs)])
    assert [d.score for d in ds] == [0, 0, 1, 2, 3, 4]
    assert ds[4].verdict is Verdict.NUDGE and "No progress" in ds[4].message


def test_no_progress_resets_on_new_information():
    obs = [Observation("a1 b1 c1"), Observation("a1 b1 c1"), Observation("a2 b2 c2"), Observation("a2 b2 c2")]
    ds = drive(NoProgressDetector(patience=1), [(ToolCall("t", {"i": i}), o) for i, o in enumerate(obs)])
    assert [d.score for d in ds] == [0, 0, 1, 0]


def test_information_tokens_handles_json_and_size():
    assert information_tokens({"k": "Hello World"}) >= {"hello", "world"}
    assert len(information_tokens("x " * 1_000_000)) == 0


def test_layered_nudges_first_then_escalates():
    det = LayeredDetector(escalate_after=1)
    call = ToolCall("search", {"q": "same"})
    ds = drive(det, [(call, Observation(f"result {i}")) for i in range(5)])
    verdicts = [d.verdict for d in ds]
    assert verdicts[:2] == [Verdict.ALLOW, Verdict.ALLOW]
    assert verdicts[2] is Verdict.NUDGE
    assert verdicts[3] is Verdict.ESCALATE and "Escalating to a human" in ds[3].message


def test_layered_budget_is_the_last_rail():
    det = LayeredDetector(layer_params={"step_budget": {"max_steps": 2}})
    ds = drive(det, [(ToolCall("t", {"i": i}), Observation(f"new {i} " * 3 + str(i))) for i in range(3)])
    assert ds[2].verdict is Verdict.STOP


def test_layered_does_not_count_re_views_that_ran_as_nudges_that_failed():
    """``progress_guard``'s re-view findings (``review_nudges``) that ran beside their nudge are
    no sign the nudges do not help: three of them in a row do not escalate."""
    det = LayeredDetector(layers=("progress_guard",), escalate_after=2)
    state = det.start()
    shown = "".join(f"{n:6}\tline {n}\n" for n in range(1, 41))
    whole = ToolCall("bash", {"command": "nl -ba src/app.py | sed -n '1,40p'"})
    state = det.record(state, whole, det.check(state, whole), Observation(shown))
    verdicts = []
    for lo in (2, 10, 20):
        call = ToolCall("bash", {"command": f"nl -ba src/app.py | sed -n '{lo},{lo + 3}p'"})
        d = det.check(state, call)
        verdicts.append(d.verdict)
        state = det.record(state, call, d, Observation("".join(f"{n:6}\tline {n}\n" for n in range(lo, lo + 4))))
    assert verdicts == [Verdict.NUDGE] * 3 and state.nudges == 0
