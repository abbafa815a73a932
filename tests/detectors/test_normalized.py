"""The signature guard of seed 002."""
from detectors.normalized import NormalizedDetector, nudge_text
from detectors.protocol import Observation, ToolCall, Verdict
from detectors.signature import normalized_signature


def run(det, calls):
    s = det.start()
    out = []
    for c in calls:
        d = det.check(s, c)
        s = det.record(s, c, d, Observation("same"))
        out.append(d)
    return out


def test_normalisation_matches_the_seed():
    assert normalized_signature("search", {"b": " Q3 Revenue ", "a": 1}) == "search::{'a': '1', 'b': 'q3 revenue'}"
    assert normalized_signature("search", {"q": "Q3"}) == normalized_signature("search", {"q": " q3\n"})


def test_trips_on_the_third_call_with_the_seed_message_and_never_raises():
    ds = run(NormalizedDetector(), [ToolCall("search", {"query": q}) for q in ("Q3 revenue", "q3 revenue ", " Q3 REVENUE", "q3 revenue")])
    assert [d.verdict for d in ds] == [Verdict.ALLOW, Verdict.ALLOW, Verdict.NUDGE, Verdict.NUDGE]
    assert [d.score for d in ds] == [1, 2, 3, 4]
    assert ds[2].message == (
        "Loop guard: you have called search with these arguments 3 times and the result has not changed. "
        "Do not repeat it. Either use a different tool, change the arguments, or give your best answer now."
    )
    assert ds[3].message == nudge_text("search", 4)


def test_counter_is_run_wide():
    assert NormalizedDetector.scope == "run"
    ds = run(NormalizedDetector(threshold=2), [ToolCall("a", {"x": 1}), ToolCall("b", {}), ToolCall("a", {"x": 1})])
    assert ds[2].verdict is Verdict.NUDGE  # not consecutive, still counted


def test_paraphrase_slips_past():
    ds = run(NormalizedDetector(), [ToolCall("search", {"query": q}) for q in ("q3 revenue", "revenue for Q3", "third-quarter revenue figures")])
    assert all(d.verdict is Verdict.ALLOW for d in ds)


from hypothesis import given
from hypothesis import strategies as st

from detectors.signature import exact_key, exact_signature, normalized_key
from tests.strategies import args_strategy


@given(a=args_strategy, b=args_strategy)
def test_hot_path_keys_mean_exactly_what_the_signatures_mean(a, b):
    assert (normalized_key("t", a) == normalized_key("t", b)) == (normalized_signature("t", a) == normalized_signature("t", b))
    assert (exact_key("t", a) == exact_key("t", b)) == (exact_signature("t", a) == exact_signature("t", b))
