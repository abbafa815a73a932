"""The official scorer: the outcome table of SPEC §5 and the composite's properties."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.scoring.outcomes import DELTA, Outcome, composite, episode_outcomes, nab_credit, summarize
from scenarios.tree import linear_episode

STANDARD = {"A_TP": 1.0, "A_FN": 1.0, "A_FP": 1.0}


def looping_episode(onset=3, n=12):
    return linear_episode("e", [("t", {"i": i}, "r", False, i >= onset) for i in range(n)])


def outcome(ep, alarm_at):
    alarms = {f"c{i}": i in alarm_at for i in range(len(ep.tool_nodes()))}
    return episode_outcomes(ep, alarms)


def test_outcome_table():
    clean = linear_episode("c", [("t", {"i": i}, "r", False, False) for i in range(6)])
    assert outcome(clean, set())[0].outcome == "tn"
    assert outcome(clean, {4})[0].outcome == "fp"
    ep = looping_episode(onset=3)
    assert outcome(ep, {1})[0].outcome == "early"
    o = outcome(ep, {3})[0]
    assert (o.outcome, o.delay) == ("tp", 0)
    o = outcome(ep, {3 + DELTA})[0]
    assert (o.outcome, o.delay) == ("tp", DELTA)
    o = outcome(ep, {3 + DELTA + 1})[0]
    assert o.outcome == "miss" and o.late
    assert outcome(ep, set())[0].outcome == "miss"


def test_scored_from_turns_history_into_context():
    ep = looping_episode(onset=2, n=6)
    for n in ep.tool_nodes()[4:]:
        n.label = type(n.label)(False, None)
    ep.meta["scored_from"] = 4  # the loop at 2-3 was already handled
    assert outcome(ep, {2})[0].outcome == "tn"
    assert outcome(ep, {5})[0].outcome == "fp"


def test_a_failed_detector_scores_the_worst_outcome():
    assert episode_outcomes(looping_episode(), {}, error="boom")[0].outcome == "miss"
    clean = linear_episode("c", [("t", {}, "r", False, False)])
    assert episode_outcomes(clean, {}, error="boom")[0].outcome == "fp"


def test_nab_credit_endpoints():
    assert nab_credit(0) == pytest.approx(1.0)
    assert nab_credit(DELTA) == pytest.approx(0.0, abs=1e-12)
    assert nab_credit(1) > nab_credit(2) > nab_credit(3)


def _o(kind, delay=None):
    return Outcome("e", "f", "u", kind, 0 if kind in ("tp", "miss", "early") else None, None, delay)


def test_never_firing_scores_zero_and_perfect_scores_hundred():
    never = [_o("miss")] * 5 + [_o("tn")] * 5
    perfect = [_o("tp", 0)] * 5 + [_o("tn")] * 5
    for w in ({"A_TP": 1, "A_FN": 1, "A_FP": 1}, {"A_TP": 1, "A_FN": 1, "A_FP": 2}, {"A_TP": 1, "A_FN": 2, "A_FP": 1}):
        assert composite(never, w) == pytest.approx(0.0)
        assert composite(perfect, w) == pytest.approx(100.0)


outcomes = st.lists(st.one_of(st.just(("tn", None)), st.just(("fp", None)), st.just(("miss", None)),
                              st.just(("early", None)), st.tuples(st.just("tp"), st.integers(0, DELTA))), min_size=1, max_size=30)


@given(outs=outcomes)
def test_an_extra_false_alarm_never_raises_the_score(outs):
    base = [_o(k, d) for k, d in outs]
    for i, o in enumerate(base):
        if o.outcome == "tn":
            worse = base[:i] + [_o("fp")] + base[i + 1:]
            assert composite(worse, STANDARD) <= composite(base, STANDARD) + 1e-9
        if o.outcome in ("tp", "miss"):
            worse = base[:i] + [_o("early")] + base[i + 1:]
            assert composite(worse, STANDARD) <= composite(base, STANDARD) + 1e-9 or o.outcome == "miss"


@given(outs=outcomes)
def test_an_earlier_catch_never_lowers_the_score(outs):
    base = [_o(k, d) for k, d in outs]
    for i, o in enumerate(base):
        if o.outcome == "tp" and o.delay > 0:
            better = base[:i] + [_o("tp", o.delay - 1)] + base[i + 1:]
            assert composite(better, STANDARD) >= composite(base, STANDARD) - 1e-9
        if o.outcome == "miss":
            better = base[:i] + [_o("tp", DELTA)] + base[i + 1:]
            assert composite(better, STANDARD) >= composite(base, STANDARD) - 1e-9


def test_summarize_counts_and_rates():
    s = summarize([_o("tn"), _o("fp"), _o("tp", 2), _o("tp", 4), _o("miss")])
    assert (s["tn"], s["fp"], s["tp"], s["miss"]) == (1, 1, 2, 1)
    assert s["false_alarm_rate"] == 0.5 and s["miss_rate"] == pytest.approx(1 / 3)
    assert s["median_delay"] == 3


# -- the composite from totals (what the bootstrap uses) is the composite ---------------------------
import numpy as np  # noqa: E402

from sim.scoring.outcomes import ScoringUnits, composite_from_totals, scoring_units  # noqa: E402

PROFILES = ({"A_TP": 1, "A_FN": 1, "A_FP": 1}, {"A_TP": 1, "A_FN": 1, "A_FP": 2}, {"A_TP": 1, "A_FN": 2, "A_FP": 1})


def _totals(outs, delta=DELTA):
    t = dict(credit=0.0, miss=0, early=0, looping=0, fp=0, clean=0)
    for o in outs:
        if o.outcome in ("tn", "fp"):
            t["clean"] += 1
            t["fp"] += o.outcome == "fp"
        else:
            t["looping"] += 1
            t["miss"] += o.outcome == "miss"
            t["early"] += o.outcome == "early"
            t["credit"] += nab_credit(o.delay, delta) if o.outcome == "tp" else 0.0
    return t


@given(outs=outcomes)
def test_composite_from_totals_equals_composite_on_scalars_and_arrays(outs):
    base = [_o(k, d) for k, d in outs]
    t = _totals(base)
    for w in PROFILES:
        expected = composite(base, w)
        assert composite_from_totals(**t, weights=w) == pytest.approx(expected)
        arr = composite_from_totals(**{k: np.array([v, v]) for k, v in t.items()}, weights=w)
        assert arr.shape == (2,) and arr == pytest.approx([expected, expected])


@given(outs=outcomes)
def test_the_composite_never_exceeds_100_and_a_silent_detector_scores_0(outs):
    base = [_o(k, d) for k, d in outs]
    silent = [_o("tn") if o.outcome in ("tn", "fp") else _o("miss") for o in base]
    for w in PROFILES:
        assert composite(base, w) <= 100.0 + 1e-9
        if any(o.outcome == "miss" for o in silent):  # with no loop to miss, silence is perfect (100)
            assert composite(silent, w) == pytest.approx(0.0)


@given(n=st.integers(0, 10), delay=st.integers(0, DELTA))
def test_a_catch_after_more_delay_never_scores_more(n, delay):
    for d2 in range(delay, DELTA + 1):
        assert nab_credit(d2) <= nab_credit(delay) + 1e-12


def test_delta_zero_counts_only_a_catch_at_the_onset():
    assert nab_credit(0, 0) == 1.0 and nab_credit(1, 0) == 0.0
    ep = looping_episode(onset=3)
    assert episode_outcomes(ep, {"c3": True}, delta=0)[0].outcome == "tp"
    assert episode_outcomes(ep, {"c4": True}, delta=0)[0].outcome == "miss"


@given(alarm_at=st.sets(st.integers(0, 11)), onset=st.integers(0, 11), extra=st.integers(0, 11))
def test_one_more_alarm_changes_a_looping_path_only_by_firing_earlier(alarm_at, onset, extra):
    """Halt mode: only the first alarm counts, so adding one can only move it earlier."""
    ep = looping_episode(onset=onset)
    before = outcome(ep, alarm_at)[0]
    after = outcome(ep, alarm_at | {extra})[0]
    if before.first_alarm is not None and extra >= before.first_alarm:
        assert after == before
    else:
        assert after.first_alarm == extra


def test_scoring_units_are_built_once_and_judge_like_episode_outcomes():
    ep = looping_episode(onset=2, n=6)
    units = scoring_units(ep)
    assert isinstance(units, ScoringUnits) and len(units.looping) == 1
    for alarms in ({}, {"c1": True}, {"c2": True}, {"c5": True}):
        assert units.outcomes(alarms) == episode_outcomes(ep, alarms)
